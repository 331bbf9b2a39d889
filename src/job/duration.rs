//! Durations as people write them: `90s`, `500ms`, `30m`, `12h`, `7d`, or
//! plain seconds. `berth config` prints seconds as `60s`, so a config file
//! (and `BERTH_TIMEOUT`, `--older-than`) takes that form back.

use serde::{Deserialize, Deserializer};

/// `input` in seconds; the error says what is accepted.
pub fn parse_secs(input: &str) -> Result<f64, String> {
    let s = input.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let factor = match unit {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => {
            return Err(format!(
                "`{input}`: unknown unit `{unit}`; use ms, s, m, h or d (e.g. 30s)"
            ));
        }
    };
    match num.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 && n * factor < 1e9 => Ok(n * factor),
        _ => Err(format!(
            "`{input}` is not a duration: use seconds or e.g. 500ms, 30s, 5m, 12h, 7d"
        )),
    }
}

/// A config value in seconds: a number, or a string [`parse_secs`] reads.
pub fn secs_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Number(f64),
        Text(String),
    }
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n)),
        // The message names no part of the value: config errors never
        // quote the file (it may hold a secret on that line).
        Some(Value::Text(t)) => parse_secs(&t).map(Some).map_err(|_| {
            serde::de::Error::custom("not a duration: use seconds or e.g. 500ms, 30s, 5m, 12h, 7d")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_secs;

    #[test]
    fn units_and_refusals() {
        for (text, secs) in [
            ("30", 30.0),
            ("30s", 30.0),
            (" 1.5s ", 1.5),
            ("500ms", 0.5),
            ("5m", 300.0),
            ("12h", 43_200.0),
            ("7d", 604_800.0),
            ("0", 0.0),
        ] {
            assert_eq!(parse_secs(text), Ok(secs), "{text}");
        }
        for bad in ["", "s", "-1s", "10x", "1e12", "nan", "inf", "3 weeks"] {
            let err = parse_secs(bad).unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{bad}: {err}");
        }
    }
}
