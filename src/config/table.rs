//! The machinery behind the key table in `keys.rs`: the `config_keys!`
//! macro that turns one row per key into everything a key needs, and the
//! small typed helpers its rows name (how a `BERTH_*` variable is read, how
//! a layer's value becomes the effective one).
//!
//! Why a `macro_rules!` and not a crate such as figment: `berth config`
//! prints where every value came from (default, which file, which variable,
//! a flag) and the trust rules compare a value's source with the project
//! file, so sources must be kept per key; the values also keep their own
//! one-line errors (`invalid max_jobs `0`: must be at least 1`), the field
//! names the rest of the crate reads (`config.max_jobs`) and serde's
//! refusal of unknown keys in `berth.toml`. A macro generates exactly the
//! code that was written by hand before, with no new dependency, and a row
//! with a part missing does not compile.
//!
//! One row gives, for its key: the `Layer` field (`Option<T>`, with its
//! serde attributes), the `Config` field with its default (a row may have
//! none: `cpus` lives in `Config::limits`), the name in `FIELDS`, the
//! reading of `BERTH_<KEY>`, the merge in `Config::apply`, the
//! `berth config` line and the key's doc for the manual's reference.

use std::path::PathBuf;
use std::str::FromStr;

use super::{Config, SizeValue, Source};
use crate::error::{Error, Result};

/// Generate `Layer`, `Config`, its `Default`, `FIELDS`, `Config::apply`,
/// `Config::describe_rows` and `env_layer` from the rows of `keys.rs`.
///
/// A row:
/// ```text
/// /// docs (and serde attributes) of the Layer field
/// key: LayerType,
///     field /// docs, attributes of the Config field
///         config_field: ConfigType = default,     (optional)
///     env reader,                 a function of this module: text, count, …
///     set conversion | via merge, conversion: (key, value) -> Result<field>;
///                                 merge: (&mut Config, value, &Source) -> Result<()>
///     show line | rows lines;     line: &Config -> String;
///                                 rows: &Config -> Vec<(name, String)>
/// ```
/// Rows are in `berth config`'s order, which is also the order values are
/// merged in and the order serde lists the keys in when one is unknown.
macro_rules! config_keys {
    (
        keys {$(
            $(#[$lmeta:meta])*
            $key:ident: $lty:ty,
                $(field $(#[$fmeta:meta])* $field:ident: $fty:ty = $default:expr,)?
                env $env:ident,
                $mode:ident $apply:expr,
                $show_kind:ident $show:expr;
        )*}
        more {$(
            $(#[$emeta:meta])*
            $extra:ident: $ety:ty = $edefault:expr,
        )*}
    ) => {
        /// One layer of settings; every field optional. `berth.toml` has this shape.
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Layer {$(
            $(#[$lmeta])*
            pub $key: Option<$lty>,
        )*}

        /// The effective configuration.
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub struct Config {
            $($(
                $(#[$fmeta])*
                pub $field: $fty,
            )?)*
            $(
                $(#[$emeta])*
                pub $extra: $ety,
            )*
        }

        impl Default for Config {
            fn default() -> Self {
                let mut c = Config {
                    $($($field: $default,)?)*
                    $($extra: $edefault,)*
                };
                for k in FIELDS {
                    c.sources.insert(k, Source::Default);
                }
                c
            }
        }

        /// Every key, in `berth config`'s order.
        pub(super) const FIELDS: &[&str] = &[$(stringify!($key)),*];

        /// Every key with its `BERTH_*` reader's name and its row's
        /// attributes as written (`doc = r" …"`, serde's): the generated
        /// reference (`reference.rs`) takes each key's doc from them, so
        /// the manual says what the row says.
        pub(super) const KEY_DOCS: &[(&str, &str, &[&str])] =
            &[$((stringify!($key), stringify!($env), &[$(stringify!($lmeta)),*])),*];

        impl Config {
            /// Lay `l` over this config; `source` says where each key's value came from.
            pub(super) fn apply(&mut self, l: Layer, source: impl Fn(&'static str) -> Source) -> Result<()> {
                $(
                    if let Some(v) = l.$key {
                        let from = source(stringify!($key));
                        $crate::config::table::apply_key!($mode, self, stringify!($key), v, $apply, &from $(, $field)?);
                        self.sources.insert(stringify!($key), from);
                    }
                )*
                self.after_layer()
            }

            /// `(name, value)` per line of `berth config`, with the key whose
            /// source the line shows (a table such as `[safety]` has one source
            /// for all its lines).
            pub(super) fn describe_rows(&self) -> Vec<(&'static str, &'static str, String)> {
                let mut rows = Vec::new();
                $(
                    $crate::config::table::show_key!($show_kind, self, rows, stringify!($key), $show);
                )*
                rows
            }
        }

        /// The `BERTH_*` layer: `BERTH_<KEY>` for every key that has a reader.
        pub(super) fn env_layer(env: &impl Fn(&str) -> Option<String>) -> Result<Layer> {
            let get = |k: &str| env(&$crate::config::table::env_name(k)).filter(|v| !v.is_empty());
            Ok(Layer {$(
                $key: $crate::config::table::$env(&get, stringify!($key))?,
            )*})
        }
    };
}
pub(super) use config_keys;

/// The merge of one key: `set` converts and stores in the key's own field,
/// `via` hands the value to a function (a key stored elsewhere, or merged).
macro_rules! apply_key {
    (set, $c:ident, $key:expr, $v:ident, $f:expr, $from:expr, $field:ident) => {
        $c.$field = $crate::config::table::convert($key, $v, $f)?;
    };
    (via, $c:ident, $key:expr, $v:ident, $f:expr, $from:expr $(, $field:ident)?) => {
        $crate::config::table::merge($c, $v, $from, $f)?;
    };
}
pub(super) use apply_key;

/// The `berth config` line(s) of one key.
macro_rules! show_key {
    (line, $c:ident, $rows:ident, $key:expr, $f:expr) => {
        let line: fn(&Config) -> String = $f;
        $rows.push(($key, $key, line($c)));
    };
    (rows, $c:ident, $rows:ident, $key:expr, $f:expr) => {
        let lines: fn(&Config) -> Vec<(&'static str, String)> = $f;
        $rows.extend(lines($c).into_iter().map(|(name, v)| (name, $key, v)));
    };
}
pub(super) use show_key;

/// A `set` conversion, called through a function so that a closure in a
/// row gets its argument types from here.
pub(super) fn convert<T, F>(
    key: &'static str,
    v: T,
    f: impl FnOnce(&'static str, T) -> Result<F>,
) -> Result<F> {
    f(key, v)
}

/// A `via` merge (see [`convert`]).
pub(super) fn merge<T>(
    c: &mut Config,
    v: T,
    from: &Source,
    f: impl FnOnce(&mut Config, T, &Source) -> Result<()>,
) -> Result<()> {
    f(c, v, from)
}

/// The value as given.
pub(super) fn keep<T>(_: &'static str, v: T) -> Result<T> {
    Ok(v)
}

/// The value as given, for a field that may be unset.
pub(super) fn some<T>(_: &'static str, v: T) -> Result<Option<T>> {
    Ok(Some(v))
}

/// Counts (`max_jobs = 0` would start nothing).
pub(super) fn at_least_one(key: &'static str, v: usize) -> Result<usize> {
    match v {
        0 => Err(Error::InvalidValue {
            what: key,
            input: "0".into(),
            message: "must be at least 1".into(),
        }),
        v => Ok(v),
    }
}

/// Amounts where zero means something (never, at once, everything) and a
/// negative or non-finite one means nothing: refused in one line ending
/// with what is accepted (`must be zero or more seconds`).
pub(super) fn zero_or_more(key: &'static str, v: f64, accepted: &str) -> Result<f64> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(Error::InvalidValue {
            what: key,
            input: v.to_string(),
            message: format!("must be {accepted}"),
        })
    }
}

/// The variable that sets `key`.
pub(super) fn env_name(key: &str) -> String {
    format!("BERTH_{}", key.to_ascii_uppercase())
}

// Readers of one `BERTH_<KEY>`: `get` gives the variable's value (unset
// and empty are the same), the error names the variable.

/// No variable: the key is only set in files (`[safety]`).
pub(super) fn none<T>(_: &impl Fn(&str) -> Option<String>, _: &'static str) -> Result<Option<T>> {
    Ok(None)
}

pub(super) fn text(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<String>> {
    Ok(get(k))
}

pub(super) fn path(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<PathBuf>> {
    Ok(get(k).map(PathBuf::from))
}

pub(super) fn number(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<f64>> {
    get(k)
        .map(|v| {
            v.parse::<f64>().map_err(|_| Error::InvalidValue {
                what: k,
                input: v.clone(),
                message: format!("{} must be a number", env_name(k)),
            })
        })
        .transpose()
}

/// A number taken as a count: `2.7` is 2, as it always was.
pub(super) fn count(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<usize>> {
    Ok(number(get, k)?.map(|v| v as usize))
}

pub(super) fn integer(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<i64>> {
    Ok(number(get, k)?.map(|v| v as i64))
}

/// Seconds as `berth config` prints them (`60s`, `2h`) or a plain number.
pub(super) fn secs(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<f64>> {
    get(k)
        .map(|v| {
            crate::job::parse_secs(&v).map_err(|message| Error::InvalidValue {
                what: k,
                input: v.clone(),
                message: format!("{}: {message}", env_name(k)),
            })
        })
        .transpose()
}

pub(super) fn size(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<SizeValue>> {
    Ok(get(k).map(SizeValue::Text))
}

pub(super) fn flag(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<bool>> {
    get(k)
        .map(|v| match v.as_str() {
            "1" | "true" | "yes" => Ok(true),
            "0" | "false" | "no" => Ok(false),
            _ => Err(Error::InvalidValue {
                what: k,
                input: v.clone(),
                message: format!("{} must be true or false", env_name(k)),
            }),
        })
        .transpose()
}

/// A word the value's type parses (`reap`, `docker`, `always`).
pub(super) fn parsed<T>(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<T>>
where
    T: FromStr,
    Error: From<T::Err>,
{
    Ok(get(k).map(|v| v.parse()).transpose()?)
}

/// A comma-separated list: `BERTH_EGRESS_ALLOW=defaults,example.com`.
pub(super) fn list(get: &impl Fn(&str) -> Option<String>, k: &'static str) -> Result<Option<Vec<String>>> {
    Ok(get(k).map(|v| v.split(',').map(|e| e.trim().to_string()).collect()))
}

/// An image name (a table, `[image] dockerfile = …`, only comes from a file).
pub(super) fn image(
    get: &impl Fn(&str) -> Option<String>,
    k: &'static str,
) -> Result<Option<crate::model::ImageValue>> {
    Ok(get(k).map(crate::model::ImageValue::Name))
}
