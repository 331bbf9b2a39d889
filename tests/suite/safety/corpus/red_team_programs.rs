//! Red-team forms of the programs a line runs (issue 25): wrappers,
//! interpreters and tools that run commands, destructive deletes, disk
//! writes, reboots, accounts, signals, the engine socket and privileged
//! containers, by the spellings that used to get past the filter; and the
//! classes that still pass, each named in SECURITY.md's known bypasses.

use super::Filter::{self, Blocks, Passes};

pub(super) const ROWS: &[(&str, &str, Filter)] = &[
    // Wrappers.
    ("env --split-string", "env --split-string 'sudo id'", Blocks),
    ("env -S joined to other flags", "env -iS'sudo id'", Blocks),
    (
        "setarch with options after the arch",
        "setarch x86_64 -R sudo id",
        Blocks,
    ),
    (
        "setarch with a computed arch",
        "setarch $(uname -m) sudo id",
        Blocks,
    ),
    ("linux64", "linux64 sudo id", Blocks),
    ("busybox cttyhack", "busybox cttyhack sudo id", Blocks),
    ("cttyhack", "cttyhack sudo id", Blocks),
    (
        "start-stop-daemon --exec",
        "start-stop-daemon -S -x /usr/bin/sudo -- id",
        Blocks,
    ),
    (
        "start-stop-daemon running a shell",
        "start-stop-daemon --start --exec=/bin/sh -- -c 'sudo id'",
        Blocks,
    ),
    (
        "parallel with commands as arguments",
        "parallel ::: 'sudo id'",
        Blocks,
    ),
    ("parallel with a command", "parallel sudo ::: id", Blocks),
    ("nice and ionice", "nice -n5 ionice -c3 sudo id", Blocks),
    ("timeout with -k", "timeout -k 1 5 sudo id", Blocks),
    ("time -p", "time -p sudo id", Blocks),
    ("command -p", "command -p sudo id", Blocks),
    ("nohup setsid -f", "nohup setsid -f sudo id", Blocks),
    ("dbus-run-session", "dbus-run-session -- sudo id", Blocks),
    ("tini", "tini -- sudo id", Blocks),
    ("dumb-init", "dumb-init sudo id", Blocks),
    // Interpreters.
    (
        "python subprocess with shell=True",
        "python3 -c \"import subprocess; subprocess.call('sudo id', shell=True)\"",
        Blocks,
    ),
    (
        "python subprocess under another name",
        "python3 -c \"import subprocess as s; s.run(['sudo','id'])\"",
        Blocks,
    ),
    (
        "python runner imported under another name",
        "python3 -c \"from os import system as s; s('sudo id')\"",
        Blocks,
    ),
    (
        "python __import__",
        "python3 -c \"__import__('os').system('sudo id')\"",
        Blocks,
    ),
    (
        "python runner kept in a variable",
        "python3 -c \"import os; f=os.system; f('sudo id')\"",
        Blocks,
    ),
    (
        "python getattr",
        "python3 -c \"import os; getattr(os,'sys'+'tem')('sudo id')\"",
        Blocks,
    ),
    (
        "python execvp",
        "python3 -c \"import os; os.execvp('sudo', ['sudo','id'])\"",
        Blocks,
    ),
    (
        "python pty.spawn",
        "python3 -c \"import pty; pty.spawn('sudo')\"",
        Blocks,
    ),
    (
        "python exec of code",
        "python3 -c \"exec('import os; os.system(\\\"sudo id\\\")')\"",
        Blocks,
    ),
    (
        "python command from chr()",
        "python3 -c \"import os; os.system(chr(115)+'udo id')\"",
        Blocks,
    ),
    (
        "perl system of a joined string",
        "perl -e 'system(\"su\".\"do id\")'",
        Blocks,
    ),
    ("perl qx", "perl -e 'qx{sudo id}'", Blocks),
    ("perl backticks", "perl -e '`sudo id`'", Blocks),
    ("perl exec qw", "perl -e 'exec qw(sudo id)'", Blocks),
    (
        "perl pipe open",
        "perl -e 'open(my $f, \"-|\", \"sudo id\")'",
        Blocks,
    ),
    (
        "ruby system with arguments",
        "ruby -e 'system(\"sudo\", \"id\")'",
        Blocks,
    ),
    ("ruby %x", "ruby -e '%x(sudo id)'", Blocks),
    ("ruby send", "ruby -e 'send(:system, \"sudo id\")'", Blocks),
    (
        "node execSync of a joined string",
        "node -e 'require(\"child_process\").execSync(\"su\"+\"do id\")'",
        Blocks,
    ),
    (
        "node spawnSync",
        "node -e 'require(\"child_process\").spawnSync(\"sudo\",[\"id\"])'",
        Blocks,
    ),
    ("php system", "php -r 'system(\"sudo id\");'", Blocks),
    (
        "php function in a variable",
        "php -r '$f=\"sys\".\"tem\"; $f(\"sudo id\");'",
        Blocks,
    ),
    ("lua os.execute", "lua -e 'os.execute(\"sudo id\")'", Blocks),
    (
        "awk system of a joined string",
        "awk 'BEGIN{system(\"su\" \"do id\")}'",
        Blocks,
    ),
    (
        "awk print into a command",
        "awk 'BEGIN{print \"id\" | \"sudo sh\"}'",
        Blocks,
    ),
    (
        "sed e with an address",
        "sed -n '1e sudo id' /etc/hostname",
        Blocks,
    ),
    (
        "tar checkpoint action abbreviated",
        "tar cf /dev/null /dev/null --checkpoint=1 --checkpoint-act=exec='sudo id'",
        Blocks,
    ),
    ("tar -I", "tar -I 'sudo id' -cf x.tar /dev/null", Blocks),
    (
        "git -c core.sshCommand",
        "git -c core.sshCommand='sudo id' fetch",
        Blocks,
    ),
    (
        "git GIT_SSH_COMMAND",
        "GIT_SSH_COMMAND='sudo id' git fetch",
        Blocks,
    ),
    (
        "git config then fetch",
        "git config core.sshCommand 'sudo id'; git fetch",
        Blocks,
    ),
    (
        "git GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_PARAMETERS=\"'core.sshCommand'='sudo id'\" git fetch",
        Blocks,
    ),
    (
        "git GIT_CONFIG_COUNT",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.sshCommand GIT_CONFIG_VALUE_0='sudo id' git fetch",
        Blocks,
    ),
    ("git ext:: remote", "git clone 'ext::sh -c sudo% id' x", Blocks),
    ("git submodule foreach", "git submodule foreach 'sudo id'", Blocks),
    ("git rebase --exec", "git rebase --exec 'sudo id' HEAD~1", Blocks),
    ("CC run by make", "CC='sudo id' make", Blocks),
    (
        "gdb -ex",
        "gdb -batch -ex '!sudo id'",
        Passes("Programs that run code from their arguments"),
    ),
    (
        "vim -c",
        "vim -es -c '!sudo id' -c q",
        Passes("Programs that run code from their arguments"),
    ),
    // Destructive deletes in other spellings.
    ("cd / then *", "cd / && rm -rf *", Blocks),
    ("pushd / then *", "pushd /; rm -rf *", Blocks),
    ("cd into a system directory", "cd /usr; rm -rf ./*", Blocks),
    ("cd .. from /", "cd /; cd ..; rm -rf *", Blocks),
    ("cd ~ then .", "cd ~ && rm -rf .", Blocks),
    (
        "cd in a branch",
        "cd /; if false; then cd /tmp; fi; rm -rf *",
        Blocks,
    ),
    (
        "../.. out of the workspace",
        "rm -rf ../../../../../../../../..",
        Blocks,
    ),
    ("~root", "rm -rf ~root", Blocks),
    ("another user's home", "rm -rf ~bob", Blocks),
    ("find -exec rm", "find / -exec rm -rf {} +", Blocks),
    (
        "find -exec rm of everything under /",
        "find / -mindepth 1 -maxdepth 1 -exec rm -rf {} +",
        Blocks,
    ),
    ("find -delete after another root", "find /tmp / -delete", Blocks),
    ("path printed by echo", "rm -rf \"$(echo /)\"", Blocks),
    ("default that is /", "rm -rf ${DIR:-/}", Blocks),
    ("all homes", "rm -rf /home/*", Blocks),
    (
        "$(pwd) climbing out",
        "rm -rf $(pwd)/../../../../../../../..",
        Blocks,
    ),
    ("cd to a HOME set on the line", "HOME=/; cd; rm -rf *", Blocks),
    ("cd through CDPATH", "CDPATH=/ cd etc && cp x passwd", Blocks),
    // Disk writes in other spellings.
    ("doubled slash", "dd if=/dev/zero of=/dev//sda", Blocks),
    (
        "stable link under /dev/disk",
        "dd if=/dev/zero of=/dev/disk/by-id/ata-X",
        Blocks,
    ),
    ("ddrescue", "ddrescue -f /dev/zero /dev/sda", Blocks),
    ("dcfldd", "dcfldd if=/dev/zero of=/dev/sda", Blocks),
    ("cryptsetup", "cryptsetup luksFormat /dev/sda", Blocks),
    ("redirection through /./", "cat /dev/zero > /dev/./sda", Blocks),
    (
        "link made on the line",
        "ln -s /dev/sda d; dd if=/dev/zero of=d",
        Blocks,
    ),
    (
        "relative name after cd /dev",
        "cd /dev && dd if=/dev/zero of=sda",
        Blocks,
    ),
    ("mkfs by label", "mkfs.ext4 /dev/disk/by-label/data", Blocks),
    ("wipefs by block number", "wipefs -a /dev/block/8:0", Blocks),
    ("kernel memory", "dd if=/dev/zero of=/dev/mem", Blocks),
    (
        "block device node made on the line",
        "mknod d b 8 0 && dd if=/dev/zero of=d",
        Blocks,
    ),
    (
        "hdparm secure erase",
        "hdparm --security-erase x /dev/sda",
        Blocks,
    ),
    // Reboots.
    (
        "systemctl start reboot.target",
        "systemctl start reboot.target",
        Blocks,
    ),
    (
        "systemctl isolate poweroff.target",
        "systemctl isolate poweroff.target",
        Blocks,
    ),
    ("loginctl reboot", "loginctl reboot", Blocks),
    ("systemctl soft-reboot", "systemctl soft-reboot", Blocks),
    ("sysrq trigger", "echo b > /proc/sysrq-trigger", Blocks),
    (
        "logind over D-Bus",
        "busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager Reboot b false",
        Blocks,
    ),
    ("busybox reboot", "busybox reboot -f", Blocks),
    // Accounts.
    ("gpasswd", "gpasswd -a me sudo", Blocks),
    (
        "dd of= with a doubled slash",
        "dd of=/etc//passwd <<< 'x::0:0::/:/bin/sh'",
        Blocks,
    ),
    ("cp through /./", "cp x /etc/./shadow", Blocks),
    ("relative name after cd /etc", "cd /etc && cp x passwd", Blocks),
    ("perl -i", "perl -pi -e 's/x/y/' /etc/passwd", Blocks),
    ("passwd -d", "passwd -d root", Blocks),
    ("chsh", "chsh -s /bin/sh root", Blocks),
    ("subuid", "echo \"me:0:1\" >> /etc/subuid", Blocks),
    // Signals.
    ("pkill every root process", "pkill -9 -u 0", Blocks),
    ("killall -u root", "killall -u root", Blocks),
    ("kill -- -1", "kill -- -1", Blocks),
    // The engine socket.
    (
        "socket printed by echo of a glob",
        "curl --unix-socket $(echo /var/run/d*.sock) http://x/info",
        Blocks,
    ),
    (
        "find -exec with the socket's name",
        "find /var/run -name 'docker.sock' -exec curl --unix-socket {} http://x/info \\;",
        Blocks,
    ),
    (
        "find -exec with a glob from /",
        "find / -name 'd*.sock' -exec curl --unix-socket {} http://x/info \\;",
        Blocks,
    ),
    (
        "socket listed by ls into a variable",
        "s=$(ls /var/run/*.sock); curl --unix-socket $s http://x/",
        Blocks,
    ),
    (
        "relative glob after cd",
        "cd /var/run && curl --unix-socket d*.sock http://x/info",
        Blocks,
    ),
    (
        "glob after --unix-socket=",
        "curl --unix-socket=/var/run/d*.sock http://x/info",
        Blocks,
    ),
    ("docker -H", "docker -H unix:///var/run/docker.sock ps", Blocks),
    (
        "python connects to it",
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('/var/run/docker.sock')\"",
        Blocks,
    ),
    (
        "through /proc/self/root",
        "curl --unix-socket /proc/self/root/var/run/docker.sock http://x/",
        Blocks,
    ),
    (
        "socket linked under another name by an earlier job",
        "curl --unix-socket ./engine http://x/info",
        Passes("The engine socket by another name"),
    ),
    // Containers with the host's privileges.
    ("-v/:/h joined", "docker run -v/:/h alpine", Blocks),
    (
        "--mount of /",
        "docker run --mount type=bind,src=/,dst=/h alpine",
        Blocks,
    ),
    ("--cap-add=ALL", "docker run --cap-add=ALL alpine", Blocks),
    (
        "seccomp unconfined",
        "docker run --security-opt seccomp=unconfined alpine",
        Blocks,
    ),
    ("--device", "docker run --device /dev/sda alpine", Blocks),
    ("/etc mounted", "docker run -v /etc:/h alpine", Blocks),
    ("host network", "docker run --network host alpine", Blocks),
    (
        "docker container run --volume=",
        "docker container run --volume=/:/h alpine",
        Blocks,
    ),
    ("podman", "podman run -v /:/h alpine", Blocks),
    // Known bypasses that remain (see SECURITY.md).
    (
        "arithmetic on a value read at run time",
        "read x <<< 'a[$(sudo id)]'; (( x ))",
        Passes("Data read at run time"),
    ),
    (
        "paths from stdin to xargs rm",
        "find / -maxdepth 0 | xargs rm -rf",
        Passes("Data read at run time"),
    ),
    (
        "deleting in a directory the filter cannot resolve",
        "cd \"$(mktemp -d)/..\" && rm -rf *",
        Passes("Data read at run time"),
    ),
    (
        "script run through a loop variable",
        "echo 'import os; os.system(\"sudo id\")' > x.py; for f in x.py; do python3 $f; done",
        Passes("Data read at run time"),
    ),
    (
        "python appends to /etc/passwd",
        "python3 -c \"open('/etc/passwd','a').write('x::0:0::/:/bin/sh')\"",
        Passes("File and socket access from interpreter code"),
    ),
    (
        "git configuration written on the line",
        "echo '[core] sshCommand = sudo id' >> .git/config; git fetch",
        Passes("Code in files"),
    ),
];
