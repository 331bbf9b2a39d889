//! Forms a hidden corpus found running although SECURITY.md named their
//! classes (issue 38, item 9): `python3 -m` of a module the line writes,
//! deletes of home by another name (`~-`, `$OLDPWD`, `/home/$USER`, an
//! unknown variable and a slash), the dynamic loader run as a program,
//! `make SHELL=`, asyncio's and IPC::Open3's spawners, recursive ACL and
//! attribute changes, program names built by substitutions, here-document
//! delimiters written as expansions, `BASH_ENV`, arithmetic through
//! `declare -i` and `${!x}`, and `env -S`.

use super::Filter::{self, Blocks, Passes};

pub(super) const ROWS: &[(&str, &str, Filter)] = &[
    // python -m.
    (
        "python3 -m of a module the line writes",
        "printf 'import os; os.system(\"sudo id\")' > m.py; python3 -m m",
        Blocks,
    ),
    (
        "python3 -m of a package the line writes",
        "mkdir p; echo 'import os; os.system(\"sudo id\")' > p/__main__.py; python3 -m p",
        Blocks,
    ),
    // deletes of home by another name.
    ("rm of the previous directory (~-)", "rm -rf ~-", Blocks),
    ("rm of $OLDPWD", "rm -rf \"$OLDPWD\"", Blocks),
    ("rm of /home/$USER", "rm -rf /home/$USER", Blocks),
    (
        "rm of an unknown variable and a slash",
        "rm -rf $UNKNOWN/",
        Blocks,
    ),
    (
        "rm of everything under an unknown variable",
        "rm -rf \"${UNKNOWN}\"/*",
        Blocks,
    ),
    (
        "rm of a bare unknown variable",
        "rm -rf \"$UNKNOWN\"",
        Passes("Data read at run time"),
    ),
    // the dynamic loader as a program.
    (
        "ld-linux running sudo",
        "/lib64/ld-linux-x86-64.so.2 /usr/bin/sudo id",
        Blocks,
    ),
    (
        "ld-linux (aarch64) running sudo",
        "/lib/ld-linux-aarch64.so.1 /usr/bin/sudo id",
        Blocks,
    ),
    (
        "ld.so with options running sudo",
        "/lib/ld.so --library-path /lib sudo id",
        Blocks,
    ),
    // make's SHELL.
    ("make SHELL= a shell", "make SHELL=/bin/sh -f x", Blocks),
    ("make SHELL= sudo", "make SHELL='sudo sh'", Blocks),
    // interpreters spawning shells.
    (
        "asyncio create_subprocess_shell",
        "python3 -c \"import asyncio; asyncio.run(asyncio.create_subprocess_shell('sudo id'))\"",
        Blocks,
    ),
    (
        "asyncio create_subprocess_exec",
        "python3 -c \"import asyncio; asyncio.run(asyncio.create_subprocess_exec('sudo', 'id'))\"",
        Blocks,
    ),
    (
        "perl IPC::Open3",
        "perl -MIPC::Open3 -e 'open3(my $i, my $o, undef, \"sudo id\")'",
        Blocks,
    ),
    (
        "perl IPC::Open2 by its full name",
        "perl -e 'use IPC::Open2; IPC::Open2::open2($o, $i, \"sudo\", \"id\")'",
        Blocks,
    ),
    // recursive ACL and attribute changes.
    ("setfacl -R on /", "setfacl -R -m u:nobody:rwx /", Blocks),
    ("chattr -R +i on /", "chattr -R +i /", Blocks),
    ("setfacl -R on home", "setfacl -R -b ~", Blocks),
    // program names from substitutions.
    ("printf reusing its format", "$(printf %s s udo) id", Blocks),
    ("which of several names", "$(which sudo ls) id", Blocks),
    ("backquotes joined", "`echo su``do` id", Blocks),
    // here-documents, BASH_ENV, arithmetic, env -S.
    (
        "here-document delimiter written as ${X}",
        "cat <<${X}\nhi\n${X}\nsudo id",
        Blocks,
    ),
    (
        "here-document delimiter written as $(…)",
        "cat <<$(echo E)\nhi\n$(echo E)\nsudo id",
        Blocks,
    ),
    (
        "BASH_ENV from a process substitution",
        "BASH_ENV=<(echo sudo id) bash -c true",
        Blocks,
    ),
    (
        "BASH_ENV from stdin",
        "BASH_ENV=/dev/stdin bash -c true <<< 'sudo id'",
        Blocks,
    ),
    (
        "BASH_ENV written by the line",
        "echo 'sudo id' > e.sh; BASH_ENV=e.sh bash -c true",
        Blocks,
    ),
    (
        "declare -i then a quoted subscript",
        "declare -i n; n='a[$(sudo id)]'",
        Blocks,
    ),
    ("${!x} of a subscript", "a='x[$(sudo id)]'; echo ${!a}", Blocks),
    (
        "env --split-string= with the command inside",
        "env --split-string='sudo id'",
        Blocks,
    ),
    ("env -vS with the command inside", "env -vS 'sudo id'", Blocks),
];
