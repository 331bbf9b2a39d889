//! Reading the JSON bodies a job sends the way the engine reads them, so a
//! check cannot be passed by spelling: the engine (Go's `encoding/json`)
//! matches field names without regard to case, so `"privileged": true` is
//! `Privileged`. Every object berth checks is first put into its canonical
//! spelling ([`canonical`]); a name it does not know, or one given twice in
//! two spellings, is refused rather than passed on unchecked.

use serde_json::{Map, Value};

/// Why a request was refused: the field and one line a client library prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub reason: String,
}

impl Refusal {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Refusal {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// `obj` (at `path`, e.g. `HostConfig`) with its keys in the spelling of
/// `known`; unknown or doubled keys are refused.
pub fn canonical(obj: Map<String, Value>, known: &[&str], path: &str) -> Result<Map<String, Value>, Refusal> {
    let mut out = Map::new();
    for (k, v) in obj {
        let Some(name) = known.iter().find(|n| n.eq_ignore_ascii_case(&k)) else {
            return Err(Refusal::new(
                join(path, &k),
                "not a field berth's scoped engine knows, so it is not forwarded",
            ));
        };
        if out.contains_key(*name) {
            return Err(Refusal::new(
                join(path, name),
                "given twice (in two spellings); say it once",
            ));
        }
        out.insert(name.to_string(), v);
    }
    Ok(out)
}

/// `a.b`, or `b` at the top.
pub fn join(path: &str, key: &str) -> String {
    match path.is_empty() {
        true => key.to_string(),
        false => format!("{path}.{key}"),
    }
}

/// Absent, null, false, zero, "" or empty: the engine's default.
pub fn unset(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
    }
}

/// A string field (absent or null: empty).
pub fn text<'a>(obj: &'a Map<String, Value>, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

/// An object field (absent or null: empty), or a refusal naming it.
pub fn object(v: Option<Value>, path: &str) -> Result<Map<String, Value>, Refusal> {
    match v {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(o)) => Ok(o),
        Some(_) => Err(Refusal::new(path, "must be an object")),
    }
}

/// An array field (absent or null: empty), or a refusal naming it.
pub fn array(v: Option<&Value>, path: &str) -> Result<Vec<Value>, Refusal> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => Ok(a.clone()),
        Some(_) => Err(Refusal::new(path, "must be a list")),
    }
}

/// A number field as i64 (absent or null: 0).
pub fn int(obj: &Map<String, Value>, key: &str, path: &str) -> Result<i64, Refusal> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| Refusal::new(join(path, key), "must be a whole number")),
        Some(_) => Err(Refusal::new(join(path, key), "must be a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spelling_does_not_pass_a_check() {
        let obj = json!({"privileged": true, "memory": 5})
            .as_object()
            .unwrap()
            .clone();
        let c = canonical(obj, &["Privileged", "Memory"], "HostConfig").unwrap();
        assert_eq!(c.get("Privileged"), Some(&json!(true)));
        let twice = json!({"Privileged": false, "PRIVILEGED": true})
            .as_object()
            .unwrap()
            .clone();
        let err = canonical(twice, &["Privileged"], "HostConfig").unwrap_err();
        assert_eq!(err.field, "HostConfig.Privileged");
        let unknown = json!({"Priviliged": true}).as_object().unwrap().clone();
        assert_eq!(
            canonical(unknown, &["Privileged"], "HostConfig")
                .unwrap_err()
                .field,
            "HostConfig.Priviliged"
        );
        assert!(unset(Some(&json!([]))) && unset(None) && !unset(Some(&json!("x"))));
    }
}
