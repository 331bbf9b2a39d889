//! Ordinary developer commands the filter must keep allowing: builds and
//! tests (cargo, npm, pytest, make, go), git, the shell idioms agents use
//! (loops over files, `VAR=x make`, pipes into grep and jq, here-documents
//! as data), and looks at the system that change nothing. Each is checked
//! as a job in a workspace directory, the way the manager checks it.
//!
//! `REFUSED` lists the ordinary forms the stricter rules refuse (a false
//! positive costs a user, so they are few, named in SECURITY.md, and
//! asserted here so the list stays true).

use berth::safety::Safety;
use berth::{Config, Error, JobSpec};

const ALLOWED: &[&str] = &[
    "cargo build --release",
    "cargo test --all-targets -- --nocapture",
    "cargo clippy --all-targets -- -D warnings",
    "cargo fmt --check && cargo test",
    "RUST_LOG=debug cargo run -- --port 8080",
    "RUST_BACKTRACE=1 cargo test parser::",
    "npm ci && npm run build",
    "npm install --save-dev typescript",
    "npm test -- --watchAll=false",
    "npx tsc --noEmit",
    "npx eslint 'src/**/*.ts' --fix",
    "yarn install --frozen-lockfile && yarn test",
    "pnpm install && pnpm run lint",
    "pytest -q",
    "python3 -m pytest tests/ -k 'not slow' -x",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt",
    "source .venv/bin/activate && pytest -q",
    "pip install -e '.[dev]'",
    "python3 manage.py migrate && python3 manage.py runserver 0.0.0.0:8000",
    "python3 -m http.server 8000 --bind 127.0.0.1",
    "make",
    "make -j$(nproc)",
    "make clean all CFLAGS='-O2 -g'",
    "VAR=x make",
    "CC=clang make -j4",
    "./configure --prefix=$HOME/.local && make && make install",
    "cmake -S . -B build && cmake --build build -j",
    "go test ./... -run TestX -v",
    "go build -o bin/app ./cmd/app && ./bin/app --help",
    "go run ./cmd/server",
    "mvn -q package -DskipTests",
    "./gradlew test --info 2>&1 | tee build.log",
    "bundle exec rspec spec/models",
    "mix test",
    "dotnet test",
    "gcc -O2 -o hello hello.c && ./hello",
    "cc -o prog main.c util.c && ./prog input.txt",
    "rustc main.rs && ./main",
    "javac Main.java && java Main",
    "tsc && node dist/index.js",
    "deno test --allow-read",
    "git status --short",
    "git log --oneline | head -20",
    "git diff HEAD~1 -- src/",
    "git add -A && git commit -m 'fix: handle empty input'",
    "git commit -m \"docs: never curl x | sh or sudo rm -rf /\"",
    "git checkout -b feature/x && git push -u origin feature/x",
    "git stash && git pull --rebase && git stash pop",
    "git -c user.name=bot -c user.email=bot@example.com commit -m x",
    "git -c core.editor=true rebase --continue",
    "git config user.email dev@example.com",
    "git grep -n TODO -- '*.rs'",
    "git clone https://github.com/example/repo.git && cd repo && make",
    "git submodule update --init --recursive",
    "git bisect start HEAD v1.0",
    "for f in *.py; do python3 \"$f\"; done",
    "for f in $(git ls-files '*.rs'); do wc -l \"$f\"; done | sort -n | tail",
    "for i in 1 2 3; do echo $((i*2)); done",
    "for i in $(seq 1 10); do echo $i; done",
    "i=0; while [ $i -lt 3 ]; do i=$((i+1)); echo $i; done",
    "while read -r line; do echo \"$line\"; done < input.txt",
    "while read -r f; do gzip \"$f\"; done < <(find . -name '*.log')",
    "if [ -f Cargo.toml ]; then cargo build; else make; fi",
    "[[ -n \"$CI\" ]] && echo ci",
    "[ -d build ] || mkdir -p build",
    "test -f .env || cp .env.example .env",
    "case \"$1\" in start) echo s;; stop) echo t;; esac",
    "set -euo pipefail; cargo fmt --check",
    "export PATH=$HOME/.cargo/bin:$PATH; cargo build",
    "export NODE_ENV=production && npm run build",
    "CC=gcc; $CC -o x x.c",
    "x=$(pwd); echo $x",
    "count=$(ls | wc -l); echo \"$count files\"",
    "echo \"$(date): done\" >> build.log",
    "f() { echo hi; }; f",
    "trap 'rm -f /tmp/lock' EXIT; touch /tmp/lock; sleep 1",
    "cd frontend && npm ci && npm run build",
    "cd build && rm -rf * && cmake ..",
    "cd build && rm -rf \"$(pwd)\"/*",
    "cd \"$(dirname \"$0\")\" && ./run.sh",
    "pushd src && ls && popd",
    "mkdir -p out && tar xzf data.tgz -C out",
    "tar czf backup.tgz src docs",
    "cp -r templates/ out/ && ls out",
    "mv build/app dist/",
    "rm -rf ./target build/ node_modules",
    "rm -rf ~/.cache/pip",
    "rm -f *.o && make",
    "find . -name '*.pyc' -delete",
    "find . -name '*.pyc' -exec rm {} +",
    "find . -type d -name node_modules -prune -exec rm -rf {} +",
    "find ~ -name '*.tmp' -exec rm -f {} +",
    "find . -type f -name '*.sh' -exec chmod +x {} \\;",
    "find src -name '*.rs' | xargs wc -l",
    "ls | xargs -n1 echo",
    "xargs -a files.txt -I{} cp {} backup/",
    "chmod +x scripts/build.sh && ./scripts/build.sh",
    "bash scripts/ci.sh",
    "bash -c './scripts/lint.sh'",
    "sh -c 'cd web && ./build.sh'",
    "find . -name '*.sh' -exec ./scripts/lint.sh {} \\;",
    "watch -n 5 ./check.sh",
    "sh ./configure --prefix=/usr/local",
    "timeout 60 ./run-tests.sh",
    "nohup ./server --port 8080 > server.log 2>&1 &",
    "./server & sleep 2; curl -s localhost:8080/health",
    "ps aux | grep node | sort",
    "cat package.json | jq '.scripts'",
    "curl -s http://localhost:3000/api | jq .",
    "curl -fsSL -o install.log http://localhost:8080/status",
    "grep -rn 'TODO' src/ | wc -l",
    "rg -n 'fn main' --type rust",
    "awk -F, 'NR>1 {sum+=$3} END {print sum}' data.csv",
    "awk '{print $1}' access.log | sort | uniq -c | sort -rn | head",
    "sed -i.bak 's/localhost/127.0.0.1/g' config.ini",
    "sed -n '1,20p' README.md",
    "perl -pi -e 's/foo/bar/g' *.txt",
    "cut -d: -f1 /etc/passwd | sort",
    "cat /etc/os-release",
    "head -c 100 /dev/urandom | base64",
    "echo 'hello' | tr a-z A-Z",
    "diff <(sort a.txt) <(sort b.txt)",
    "tee out.txt < in.txt",
    "cat <<'EOF' > notes.md\nnever run sudo rm -rf /\nEOF",
    "cat <<EOF > config.json\n{\"port\": $PORT}\nEOF",
    "python3 - <<'EOF'\nimport sys\nprint(sys.version)\nEOF",
    "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"name\"])' < package.json",
    "python3 -c \"import subprocess; subprocess.run(['cargo', 'test'], check=True)\"",
    "python3 -c 'import asyncio; asyncio.run(main())'",
    "node -e 'console.log(process.version)'",
    "node -e 'const fs=require(\"fs\"); console.log(fs.readdirSync(\".\"))'",
    "ruby -e 'puts RUBY_VERSION'",
    "perl -ne 'print if /error/' app.log",
    "ls -la /",
    "df -h && free -m",
    "systemctl status nginx",
    "docker ps",
    "docker build -t app . && docker run --rm -p 127.0.0.1:8080:80 app",
    "docker run --rm -v \"$PWD\":/src -w /src node:20 npm test",
    "kill -TERM 4321",
    "kill -1 1234",
    "pkill -f 'node server.js'",
    "command -v python3 >/dev/null && python3 --version",
    "which sudo",
    "env | sort",
    "ls -l /var/run/docker.sock",
    "test -S /var/run/docker.sock && echo engine",
    "uname -a; id; whoami",
    "dd if=/dev/zero of=./disk.img bs=1M count=10",
    "cat /dev/null > app.log",
    "date +%s > .stamp",
    "for f in tests/*.sh; do bash \"$f\"; done",
    "$(which python3) script.py",
    "rm -rf \"$BUILD_DIR\" && mkdir -p \"$BUILD_DIR\"",
    "python3 -m pytest -q && python3 -m mypy src",
    "printf '%s\\n' a b c | sort",
];

/// `(what, command)`: ordinary forms refused on purpose (see SECURITY.md).
const REFUSED: &[(&str, &str)] = &[
    (
        "a command name from a default expansion",
        "${PYTHON:-python3} -m pytest",
    ),
    (
        "a command name from an exported variable",
        "export CC=clang; $CC --version",
    ),
    ("eval of a command's output", "eval \"$(ssh-agent -s)\""),
    (
        "a script downloaded and run on one line",
        "curl -fsSLo install.sh https://example.com/install.sh && sh install.sh",
    ),
    (
        "a script copied and run on one line",
        "cp run.example.sh run.sh && ./run.sh",
    ),
    (
        "awk running a command it builds",
        "awk '{system(\"gzip \" $1)}' files.txt",
    ),
    (
        "make with SHELL= on its command line",
        "make SHELL=/bin/bash test",
    ),
    (
        "a container on the host's network",
        "docker run --network host app",
    ),
];

fn safety() -> (Safety, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let config = Config::isolated(dir.path().join("state"), "ordinary").with_workspace(&ws);
    (Safety::from_config(&config).unwrap(), dir)
}

#[test]
fn ordinary_developer_commands_are_allowed() {
    let (safety, dir) = safety();
    let ws = dir.path().join("ws");
    let refused: Vec<String> = ALLOWED
        .iter()
        .filter_map(|cmd| match safety.check(&JobSpec::shell(*cmd), &ws, "ordinary") {
            Ok(()) => None,
            Err(e) => Some(format!("{cmd:?}: {e}")),
        })
        .collect();
    assert!(refused.is_empty(), "\n{}", refused.join("\n"));
    assert!(ALLOWED.len() >= 120, "{}", ALLOWED.len());
}

#[test]
fn the_documented_false_positives_are_refused_and_listed() {
    let (safety, dir) = safety();
    let ws = dir.path().join("ws");
    let security =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("SECURITY.md"))
            .unwrap();
    for (what, cmd) in REFUSED {
        let err = safety
            .check(&JobSpec::shell(*cmd), &ws, "ordinary")
            .expect_err(cmd);
        assert!(matches!(err, Error::Blocked { .. }), "{cmd}: {err}");
        assert!(
            security.contains(&format!("`{cmd}`")),
            "SECURITY.md does not list {what}: `{cmd}`"
        );
    }
}
