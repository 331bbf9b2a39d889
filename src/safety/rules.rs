//! The default blocklist: one regex and one plain-words reason per kind of
//! command that is almost never what an agent should run. Patterns are
//! matched against the normaliser's views (lower case, quotes removed,
//! program as a base name, wrappers peeled; see `normalize.rs`), so they are
//! written against that form: `^sudo(\s|$)` catches `/usr/bin/SUDO`, `env sudo`
//! and `s'u'do` alike. A `|` inside a quoted argument is shown as `¦`, so a
//! `\|` in a pattern only ever meets a real pipe. `berth.toml` can add rules
//! (`[[safety.blocked]]`) or turn these off (`safety.default_blocklist = false`).

/// Block devices a job has no business writing to (also by their stable
/// links under `/dev/disk/` and `/dev/block/`), and the memory devices.
macro_rules! dev {
    () => {
        r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|disk[0-9]|md[0-9]|dm-[0-9]|mapper/|loop[0-9]|sr[0-9]|nbd[0-9]|zram[0-9]|ram[0-9]|sg[0-9]|disk/|block/|root(?:\s|$)|mem(?:\s|$)|kmem(?:\s|$)|port(?:\s|$))"
    };
}
/// Shells: code piped into one is code the filter never sees.
macro_rules! shell {
    () => {
        r"(?:sh|bash|zsh|dash|ksh|ash|mksh|fish|rbash|yash|posh|csh|tcsh)"
    };
}
/// Interpreters that run a script from stdin.
macro_rules! interp {
    () => {
        r"(?:python[0-9.]*|perl|ruby|node|php)"
    };
}
/// `/` or a home directory (yours, `~`; another user's, `~name`), as the
/// normaliser shows them.
macro_rules! root_or_home {
    () => {
        r"(?:/|/\*|/\.\*|~[a-z_][a-z0-9_.-]*(?:/\*|/\.\*)?|~|~/\*|~/\.\*|\$home|\$home/\*)"
    };
}
/// What `rm` may be told that is `/` or a home directory although it is
/// not written as one: the previous directory (`~-`, `$OLDPWD`: the line
/// cannot tell where it was), `/home/$USER`, and a path made only of a
/// variable the filter does not know followed by `/` (`$X/`, `$X/*`: with
/// `X` unset that is `/` or `/*`). A bare `$X` is left alone: unset, it
/// deletes nothing, and `rm -rf "$BUILD_DIR"` is an everyday command.
macro_rules! maybe_home {
    () => {
        r"(?:~-(?:/|/\*)?|\$oldpwd(?:/|/\*)?|/home/\$[a-z_][a-z0-9_]*(?:/|/\*)?|\$[a-z_][a-z0-9_]*(?:/|/\*|/\.\*))"
    };
}
/// Top-level system directories.
macro_rules! system_dir {
    () => {
        r"/(?:bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|run|sbin|srv|sys|usr|var)(?:/\*?)?"
    };
}
/// The account and sudo databases.
macro_rules! auth {
    () => {
        r"/etc/(?:passwd|shadow|gshadow|group|sudoers|subuid|subgid)(?:\.d\S*)?"
    };
}
/// A recursive flag of rm/chmod/chown.
macro_rules! recursive {
    () => {
        r"(?:-[a-z]*r[a-z]*|--recursive)"
    };
}
/// Output redirection operators as the lexer keeps them.
macro_rules! redirect {
    () => {
        r"(?:^|\s)(?:>|>>|>\||&>|&>>|>&|<>)\s*"
    };
}

/// The engine socket rule: a view that names the socket or `DOCKER_HOST`.
const ENGINE: &str = r"(?:docker|containerd|podman|crio|cri-dockerd|buildkitd)\.sock|/run/(?:podman|containerd)/|\bdocker_host\b";

/// Views a default rule lets through although they match it: mentioning the
/// engine socket to look at it (`grep`, `echo`, `test -S`, `ls`) is not using
/// it, as long as nothing is redirected or piped.
pub fn exception(pattern: &str) -> Option<&'static str> {
    (pattern == ENGINE).then_some(
        r"^(?:grep|egrep|fgrep|zgrep|rg|echo|printf|test|\[|\[\[|ls|stat|file|which|type|command\s+-v)\s[^<>|¦]*$",
    )
}

/// `(pattern, reason)`, checked in this order; the first match is reported.
pub const DEFAULT_RULES: &[(&str, &str)] = &[
    (
        r"^(?:sudo|su|doas|pkexec|sudoedit|run0|gosu|su-exec|runuser|sg|newgrp)(?:\s|$)",
        "privilege escalation (sudo, su, doas, pkexec): a job runs with your rights, never more",
    ),
    (
        r"^\$\(\?\)",
        "dynamic command: what would run is computed at run time (a command name not written on the line nor assigned literally before it, a placeholder, glob or substitution the filter cannot evaluate, code a shell or interpreter gets from where the filter cannot read it, a file this line writes and runs, or nesting too deep), so the filter cannot tell what would run",
    ),
    (
        r"^eval\s.*\$",
        "eval of a value computed at run time: the filter cannot tell what would run",
    ),
    (
        concat!(r"^(?:", shell!(), r"|source|\.)\s(?:.*\s)?<\(\?\)"),
        "runs code from a process substitution the filter cannot read",
    ),
    (
        concat!(
            r"(?:^|\|\s*)(?:curl|wget|fetch)\s[^|]*\|\s*(?:",
            shell!(),
            r"(?:\s|$)|",
            interp!(),
            r"(?:\s+-\S*)*\s*(?:\||$))"
        ),
        "pipes a download straight into an interpreter: download it, read it, then run it",
    ),
    (
        concat!(
            r"(?:base64\s(?:[^|]*\s)?(?:-d|--decode)|xxd\s(?:[^|]*\s)?-r\S*)(?:\s[^|]*)?\|\s*(?:",
            shell!(),
            "|",
            interp!(),
            r")(?:\s|$)"
        ),
        "decodes hidden code into an interpreter",
    ),
    (
        concat!(
            r"\|\s*",
            shell!(),
            r"(?:\s+[-+][-abd-z]*)*(?:\s+-s(?:\s[^|]*)?)?\s*(?:\||$)"
        ),
        "dynamic command: pipes data into a shell, so the filter cannot read the code it would run",
    ),
    (
        r"^function\(\) .*@self@.*(?:\||&)",
        "fork bomb: a function that calls itself in a pipe or in the background",
    ),
    (
        concat!(
            r"^rm\s(?:.*\s)?",
            recursive!(),
            r"\s(?:.*\s)?(?:",
            root_or_home!(),
            "|",
            maybe_home!(),
            r")(?:\s|$)|^rm\s(?:.*\s)?(?:",
            root_or_home!(),
            "|",
            maybe_home!(),
            r")\s(?:.*\s)?",
            recursive!(),
            r"(?:\s|$)|^rm\s.*--no-preserve-root"
        ),
        "recursive deletion of / or of the home directory",
    ),
    (
        concat!(
            r"^rm\s(?:.*\s)?",
            recursive!(),
            r"\s(?:.*\s)?",
            system_dir!(),
            r"(?:\s|$)"
        ),
        "recursive deletion of a system directory",
    ),
    (
        concat!(
            r"^find\s(?:[^-]\S*\s+)*",
            root_or_home!(),
            r"(?:\s.*)?\s-delete(?:\s|$)"
        ),
        "deletes every file under / or the home directory",
    ),
    (
        concat!(
            r"^(?:chmod|chown|chgrp)\s(?:.*\s)?(?:/|/\*)(?:\s|$)|^(?:chmod|chown|chgrp|setfacl|chattr)\s(?:.*\s)?",
            recursive!(),
            r"\s(?:.*\s)?(?:",
            system_dir!(),
            "|",
            root_or_home!(),
            r")(?:\s|$)"
        ),
        "changes the permissions, owner, ACLs or attributes of / or a system directory",
    ),
    (
        r"^(?:make|gmake|remake)\s(?:.*\s)?(?:shell|\.shellflags|makeshell)=",
        "make with SHELL= set on its command line runs every recipe through that program",
    ),
    (
        r"^(?:mkfs(?:\.\S+)?|mke2fs|mkswap|mkdosfs|mkntfs|mkexfatfs)(?:\s|$)",
        "creates a file system (formats a disk)",
    ),
    (
        concat!(
            r"^(?:fdisk|sfdisk|cfdisk|gdisk|sgdisk|parted|wipefs|blkdiscard|shred|badblocks|cryptsetup|hdparm|nvme|sg_format|mdadm|pvcreate|pvremove|vgcreate|vgextend|vgremove|lvremove|zpool|dmsetup|sgdisk)\s(?:.*\s)?",
            dev!()
        ),
        "partitions or wipes a disk",
    ),
    (
        concat!(
            r"^(?:dd|dcfldd|dc3dd)\s(?:.*\s)?of=",
            dev!(),
            "|",
            redirect!(),
            dev!(),
            r"|^(?:tee|cp|mv|install|pv|ddrescue|dd_rescue)\s(?:.*\s)?",
            dev!(),
            r"|^mknod\s(?:.*\s)?b(?:\s|$)"
        ),
        "writes onto a block device",
    ),
    (
        ENGINE,
        "reaches the container engine (its socket is root on the host)",
    ),
    (
        concat!(
            r"^(?:docker|podman|nerdctl)\s(?:.*\s)?(?:--privileged|--(?:pid|ipc|userns|uts|network|net|cgroupns)[= ]host",
            r"|(?:-v|--volume)[= ]?/(?:(?:etc|root|boot|dev|proc|sys|run|var/run|var/lib/docker|usr|bin|sbin|lib\S*|home)/?)?:",
            r"|--mount[= ]\S*(?:src|source)=/(?:(?:etc|root|boot|dev|proc|sys|run|var/run|usr|home)/?)?(?:,|\s|$)",
            r"|--cap-add[= ]?(?:all|sys_admin|sys_module|sys_ptrace|sys_rawio|dac_read_search|dac_override|net_admin|bpf)(?:\s|$)",
            r"|--security-opt[= ]?(?:seccomp|apparmor|systempaths)[=:]unconfined|--security-opt[= ]?label[=:]disable",
            r"|--device[= ]?/dev/|--device-cgroup-rule)"
        ),
        "starts a container with the host's privileges or root file system",
    ),
    (
        concat!(
            r"^(?:shutdown|reboot|halt|poweroff|kexec)(?:\s|$)|^(?:init|telinit)\s+[06](?:\s|$)",
            r"|^(?:systemctl|loginctl)\s(?:.*\s)?(?:poweroff|reboot|halt|kexec|soft-reboot|suspend|hibernate|hybrid-sleep|suspend-then-hibernate|emergency|rescue)(?:\.target)?(?:\s|$)",
            r"|/proc/sysrq-trigger|^(?:busctl|dbus-send|gdbus|qdbus)\s.*login1.*(?:reboot|poweroff|halt|suspend|hibernate)"
        ),
        "shuts down or reboots the machine",
    ),
    (
        concat!(
            redirect!(),
            auth!(),
            r"(?:\s|$)|^(?:tee|truncate|chattr|chmod|chown)\s(?:.*\s)?",
            auth!(),
            r"(?:\s|$)|^(?:cp|mv|install|ln)\s.*\s",
            auth!(),
            r"$|^sed\s(?:.*\s)?-i\S*\s(?:.*\s)?",
            auth!(),
            r"(?:\s|$)|^dd\s(?:.*\s)?of=",
            auth!(),
            r"|^(?:perl|ruby)\s(?:.*\s)?-\S*i\S*\s(?:.*\s)?",
            auth!(),
            r"(?:\s|$)|^(?:useradd|usermod|userdel|groupadd|groupmod|groupdel|gpasswd|chpasswd|chage|chfn|chsh|passwd|newusers|adduser|deluser|addgroup|delgroup|visudo|vipw|vigr)(?:\s|$)"
        ),
        "changes the account or sudo database (/etc/passwd, shadow, sudoers)",
    ),
    (
        r"^kill\s+\S+\s+(?:.*\s)?-1(?:\s|$)|^killall5(?:\s|$)|^(?:pkill|killall)\s(?:.*\s)?(?:-u|-U|--uid|--euid|--user)(?:\s+|=)?(?:0|root)(?:\s|,|$)",
        "signals every process you may signal (kill -1), or every process of root",
    ),
    (
        r"^nsenter(?:\s|$)",
        "enters another process's namespaces (a container escape)",
    ),
    (
        r"^(?:insmod|rmmod|modprobe)(?:\s|$)",
        "loads or unloads kernel modules",
    ),
];
