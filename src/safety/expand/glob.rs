//! Shell glob matching, for the one question the filter asks of a glob it
//! does not expand: would it match the container engine's socket?

/// Where container engines put their sockets; a glob matching one of these
/// (`/var/run/d*.sock`) reaches the engine as surely as the name does.
pub const ENGINE_SOCKETS: &[&str] = &[
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/var/run/podman/podman.sock",
    "/run/crio/crio.sock",
];

/// The engine socket an absolute glob pattern matches, if any.
pub fn engine_socket_glob(pattern: &str) -> Option<&'static str> {
    if !pattern.starts_with('/') || pattern.len() > 4096 {
        return None;
    }
    let p: Vec<char> = pattern.chars().collect();
    ENGINE_SOCKETS
        .iter()
        .copied()
        .find(|s| glob_match(&p, &s.chars().collect::<Vec<_>>()))
}

/// Whether the glob `pattern` matches `text` (one path component or a whole path).
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    if pattern.len() > 4096 {
        return false;
    }
    glob_match(
        &pattern.chars().collect::<Vec<_>>(),
        &text.chars().collect::<Vec<_>>(),
    )
}

/// Shell glob matching (`*`, `?`, `[…]`; `*` does not cross `/`), with
/// the classic single back-track point per star: O(pattern × text).
fn glob_match(p: &[char], t: &[char]) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                '?' if t[ti] != '/' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' => {
                    if let Some((ok, next)) = class(p, pi, t[ti])
                        && ok
                    {
                        pi = next;
                        ti += 1;
                        continue;
                    }
                }
                c if c == t[ti] => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, st)) if t[st] != '/' => {
                star = Some((sp, st + 1));
                pi = sp + 1;
                ti = st + 1;
            }
            _ => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A `[…]` class at `p[i]`: whether `c` is in it, and where the class ends.
fn class(p: &[char], i: usize, c: char) -> Option<(bool, usize)> {
    let mut j = i + 1;
    let negate = matches!(p.get(j), Some('!' | '^'));
    if negate {
        j += 1;
    }
    let mut hit = false;
    let mut first = true;
    while let Some(&x) = p.get(j) {
        if x == ']' && !first {
            return Some((hit != negate, j + 1));
        }
        first = false;
        if p.get(j + 1) == Some(&'-') && p.get(j + 2).is_some_and(|&y| y != ']') {
            hit |= (x..=p[j + 2]).contains(&c);
            j += 3;
        } else {
            hit |= x == c;
            j += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_that_match_the_engine_socket() {
        assert_eq!(
            engine_socket_glob("/var/run/d*.sock"),
            Some("/var/run/docker.sock")
        );
        assert_eq!(engine_socket_glob("/???/docker.so?k"), Some("/run/docker.sock"));
        assert_eq!(
            engine_socket_glob("/run/[c-e]ocker.sock"),
            Some("/run/docker.sock")
        );
        assert_eq!(engine_socket_glob("/var/*/*.sock"), Some("/var/run/docker.sock"));
        assert_eq!(engine_socket_glob("/*"), None, "a star does not cross a slash");
        assert_eq!(engine_socket_glob("/tmp/*.sock"), None);
        assert_eq!(engine_socket_glob("src/*.rs"), None);
    }
}
