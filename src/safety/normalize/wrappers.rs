//! The table of wrappers: commands that run the rest of their arguments as
//! a command (`nohup`, `timeout 5`, `chroot DIR`, `flock FILE`, `strace -o F`
//! …), with the options that take a value and the operands before the
//! command, so the normaliser can peel them off and see what really runs.

/// A command that runs the rest of its arguments as a command: which of its
/// options take a value, and how many operands come before that command.
/// After the operands, `-c STRING` (flock, runuser) is a shell payload.
pub(super) struct Wrapper {
    pub(super) name: &'static str,
    pub(super) with_value: &'static [&'static str],
    pub(super) operands: usize,
}

const fn wrapper(name: &'static str, with_value: &'static [&'static str], operands: usize) -> Wrapper {
    Wrapper {
        name,
        with_value,
        operands,
    }
}

pub(super) const WRAPPERS: &[Wrapper] = &[
    wrapper("command", &[], 0),
    wrapper("builtin", &[], 0),
    wrapper("exec", &["-a"], 0),
    wrapper("nohup", &[], 0),
    wrapper("nice", &["-n", "--adjustment"], 0),
    wrapper(
        "ionice",
        &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        0,
    ),
    wrapper("timeout", &["-s", "-k", "--signal", "--kill-after"], 1),
    wrapper("stdbuf", &["-i", "-o", "-e", "--input", "--output", "--error"], 0),
    wrapper(
        "xargs",
        &[
            "-a",
            "-d",
            "-E",
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "--arg-file",
            "--delimiter",
            "--replace",
        ],
        0,
    ),
    wrapper("setsid", &[], 0),
    wrapper("busybox", &[], 0),
    wrapper("time", &["-f", "-o", "--format", "--output"], 0),
    wrapper("unbuffer", &[], 0),
    wrapper("chroot", &["--userspec", "--groups"], 1),
    wrapper(
        "unshare",
        &[
            "-S",
            "--setuid",
            "-G",
            "--setgid",
            "-R",
            "--root",
            "-w",
            "--wd",
            "--propagation",
        ],
        0,
    ),
    wrapper("flock", &["-w", "--timeout", "-E", "--conflict-exit-code"], 1),
    wrapper("taskset", &[], 1),
    wrapper("prlimit", &["-p", "--pid", "-o", "--output"], 0),
    wrapper(
        "setpriv",
        &[
            "--reuid",
            "--regid",
            "--ruid",
            "--rgid",
            "--euid",
            "--egid",
            "--groups",
            "--inh-caps",
            "--ambient-caps",
            "--bounding-set",
            "--securebits",
            "--pdeathsig",
            "--selinux-label",
            "--apparmor-profile",
        ],
        0,
    ),
    wrapper(
        "runuser",
        &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-G",
            "--supp-group",
            "-s",
            "--shell",
            "-w",
        ],
        0,
    ),
    wrapper(
        "strace",
        &[
            "-o", "-e", "-p", "-s", "-u", "-E", "-P", "-I", "-a", "-b", "-O", "-S", "-X",
        ],
        0,
    ),
    wrapper(
        "ltrace",
        &["-o", "-e", "-p", "-s", "-u", "-n", "-a", "-A", "-D", "-F", "-l"],
        0,
    ),
    wrapper("chrt", &[], 1),
    wrapper("setarch", &[], 1),
    wrapper("linux32", &[], 0),
    wrapper("linux64", &[], 0),
    wrapper("faketime", &["-f"], 1),
    wrapper("cgexec", &["-g"], 0),
    wrapper(
        "numactl",
        &[
            "-N",
            "-m",
            "-C",
            "-p",
            "-i",
            "--cpunodebind",
            "--membind",
            "--physcpubind",
            "--preferred",
            "--interleave",
        ],
        0,
    ),
    wrapper("fakeroot", &["-s", "-i", "-l", "--lib", "--faked"], 0),
    wrapper(
        "systemd-run",
        &[
            "-p",
            "--property",
            "-u",
            "--unit",
            "--uid",
            "--gid",
            "-E",
            "--setenv",
            "-M",
            "--machine",
            "--slice",
            "--description",
            "--working-directory",
            "-H",
            "--host",
        ],
        0,
    ),
    wrapper("dbus-run-session", &["--config-file", "--dbus-daemon"], 0),
    wrapper(
        "xvfb-run",
        &[
            "-n",
            "-s",
            "-e",
            "-f",
            "-p",
            "--server-num",
            "--server-args",
            "--error-file",
            "--auth-file",
        ],
        0,
    ),
    wrapper("firejail", &[], 0),
    wrapper("eatmydata", &[], 0),
    wrapper("nocache", &[], 0),
    wrapper("torsocks", &[], 0),
    wrapper("proxychains", &["-f"], 0),
    wrapper("proxychains4", &["-f"], 0),
    wrapper("catchsegv", &[], 0),
    wrapper("valgrind", &[], 0),
    wrapper("rlwrap", &[], 0),
    wrapper(
        "chpst",
        &[
            "-u", "-U", "-e", "-/", "-n", "-l", "-L", "-m", "-d", "-o", "-p", "-f", "-c", "-r", "-t",
        ],
        0,
    ),
    wrapper("setuidgid", &[], 1),
    wrapper("envdir", &[], 1),
    wrapper(
        "softlimit",
        &["-m", "-a", "-d", "-o", "-p", "-f", "-c", "-r", "-s", "-l", "-t"],
        0,
    ),
    wrapper("ssh-agent", &["-a", "-E", "-t", "-P"], 0),
    // busybox's applet that gives the command a controlling terminal.
    wrapper("cttyhack", &[], 0),
    // Init shims that run their arguments.
    wrapper("tini", &["-s", "-p", "-e", "-l"], 0),
    wrapper("dumb-init", &["-r", "--rewrite"], 0),
    wrapper("catatonit", &[], 0),
    wrapper("daemonize", &["-a", "-c", "-e", "-o", "-p", "-l", "-u", "-E"], 0),
    wrapper("runcon", &["-u", "-r", "-t", "-l"], 0),
    wrapper("sshpass", &["-p", "-f", "-d", "-e", "-P"], 0),
    // The dynamic loader run as a program runs the program it is given
    // (`/lib64/ld-linux-x86-64.so.2 /usr/bin/sudo id`); every loader's
    // name is looked up as this one (see `wrapper_named`).
    wrapper(
        "ld.so",
        &[
            "--library-path",
            "--preload",
            "--audit",
            "--argv0",
            "--inhibit-rpath",
            "--inhibit-cache",
            "--glibc-hwcaps-mask",
            "--glibc-hwcaps-prepend",
        ],
        0,
    ),
];

/// The wrapper of the table a program's base name is, if any: the dynamic
/// loader under any of its names (`ld-linux-x86-64.so.2`,
/// `ld-linux-aarch64.so.1`, `ld-musl-x86_64.so.1`, `ld.so`, `ld-2.31.so`).
pub(super) fn wrapper_named(name: &str) -> Option<&'static Wrapper> {
    let loader =
        name == "ld.so" || ((name.starts_with("ld-") || name.starts_with("ld.so.")) && name.contains(".so"));
    let name = if loader { "ld.so" } else { name };
    WRAPPERS.iter().find(|x| x.name == name)
}

/// Where a shell, told to run a file, reads code nobody wrote down.
pub(super) fn unreadable_script(path: &str) -> bool {
    path == "-" || path.starts_with("/dev/") || path.starts_with("/proc/")
}
