//! The calls that run commands in each interpreter language, the names that
//! reach any function by a computed name, and the interpreters' inline-code
//! options (see `code.rs`).

use super::strings::Lang;

/// What a call does with its arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    /// A string is a shell line; a list (or several strings) an argv.
    Shell,
    /// A program, then its argv (with argv[0]).
    Exec,
    /// A program, then its arguments (Node's `spawn`, `execFile`).
    Spawn,
    /// Code in the same language.
    Eval,
    /// Perl's `open`, which runs a command when its mode is a pipe.
    Open,
}

/// The calls that run commands, per language.
pub(super) fn calls(lang: Lang) -> &'static [(&'static str, Kind)] {
    use Kind::*;
    match lang {
        Lang::Python => &[
            ("system", Shell),
            ("popen", Shell),
            ("Popen", Shell),
            ("run", Shell),
            ("call", Shell),
            ("check_call", Shell),
            ("check_output", Shell),
            ("getoutput", Shell),
            ("getstatusoutput", Shell),
            ("spawn", Shell),
            ("startfile", Shell),
            ("execl", Exec),
            ("execle", Exec),
            ("execlp", Exec),
            ("execlpe", Exec),
            ("execv", Exec),
            ("execve", Exec),
            ("execvp", Exec),
            ("execvpe", Exec),
            // asyncio's: a shell line, and a program then its arguments.
            ("create_subprocess_shell", Shell),
            ("create_subprocess_exec", Spawn),
            ("posix_spawn", Exec),
            ("posix_spawnp", Exec),
            ("spawnl", Exec),
            ("spawnle", Exec),
            ("spawnlp", Exec),
            ("spawnlpe", Exec),
            ("spawnv", Exec),
            ("spawnve", Exec),
            ("spawnvp", Exec),
            ("spawnvpe", Exec),
            ("exec", Eval),
            ("eval", Eval),
            ("compile", Eval),
        ],
        Lang::Perl => &[
            ("system", Shell),
            ("exec", Shell),
            ("readpipe", Shell),
            // IPC::Open2/Open3: handles first, then the command (a handle
            // is not a literal, so a call with any is unreadable, refused).
            ("open2", Shell),
            ("open3", Shell),
            ("open", Open),
            ("eval", Eval),
        ],
        Lang::Ruby => &[
            ("system", Shell),
            ("exec", Shell),
            ("spawn", Shell),
            ("popen", Shell),
            ("popen2", Shell),
            ("popen2e", Shell),
            ("popen3", Shell),
            ("capture2", Shell),
            ("capture2e", Shell),
            ("capture3", Shell),
            ("pipeline", Shell),
            ("pipeline_r", Shell),
            ("pipeline_w", Shell),
            ("pipeline_rw", Shell),
            ("pipeline_start", Shell),
            ("eval", Eval),
            ("instance_eval", Eval),
            ("class_eval", Eval),
            ("module_eval", Eval),
        ],
        Lang::Node => &[
            ("exec", Shell),
            ("execSync", Shell),
            ("spawn", Spawn),
            ("spawnSync", Spawn),
            ("execFile", Spawn),
            ("execFileSync", Spawn),
            ("fork", Spawn),
            ("eval", Eval),
            ("Function", Eval),
            ("runInThisContext", Eval),
            ("runInNewContext", Eval),
            ("runInContext", Eval),
            ("compileFunction", Eval),
        ],
        Lang::Php => &[
            ("system", Shell),
            ("exec", Shell),
            ("shell_exec", Shell),
            ("passthru", Shell),
            ("popen", Shell),
            ("proc_open", Shell),
            ("pcntl_exec", Spawn),
            ("eval", Eval),
            ("assert", Eval),
            ("create_function", Eval),
        ],
        Lang::Awk => &[("system", Shell)],
        Lang::Lua => &[
            ("execute", Shell),
            ("popen", Shell),
            ("load", Eval),
            ("loadstring", Eval),
            ("dofile", Eval),
            ("loadfile", Eval),
        ],
    }
}

/// Names that reach any function by a computed name: the code cannot be read.
pub(super) const OPAQUE: &[(Lang, &str)] = &[
    (Lang::Python, "getattr"),
    (Lang::Python, "importlib"),
    (Lang::Python, "ctypes"),
    (Lang::Python, "__builtins__"),
    (Lang::Ruby, "send"),
    (Lang::Ruby, "public_send"),
    (Lang::Ruby, "__send__"),
    (Lang::Ruby, "method"),
    (Lang::Node, "binding"),
    (Lang::Php, "call_user_func"),
    (Lang::Php, "call_user_func_array"),
    (Lang::Php, "forward_static_call"),
];

/// Interpreters, their inline-code options, and the options whose value
/// is not the script.
pub(super) const INTERPRETERS: &[(&str, Lang, &str, &[&str])] = &[
    ("python", Lang::Python, "c", &["-m", "-W", "-X", "-Q"]),
    ("perl", Lang::Perl, "eE", &["-I", "-M", "-m", "-x"]),
    ("ruby", Lang::Ruby, "e", &["-I", "-r", "-C", "-E"]),
    (
        "node",
        Lang::Node,
        "ep",
        &["-r", "--require", "--import", "--loader"],
    ),
    ("nodejs", Lang::Node, "ep", &["-r", "--require"]),
    ("php", Lang::Php, "r", &["-c", "-d", "-z"]),
    ("lua", Lang::Lua, "e", &["-l"]),
];
