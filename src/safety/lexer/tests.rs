//! The lexer reads the line as bash does where a naive reading differs.

use super::{Part, Sep, Tok, Word, lex};

fn words(toks: &[Tok]) -> Vec<String> {
    toks.iter()
        .filter_map(|t| match t {
            Tok::Word(Word(parts)) => Some(
                parts
                    .iter()
                    .map(|p| match p {
                        Part::Lit(s) | Part::Quoted(s) => s.clone(),
                        Part::Subst(s) => format!("$({s})"),
                        Part::Complex(s) => format!("${{{s}}}"),
                        other => format!("{other:?}"),
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

#[test]
fn a_carriage_return_is_part_of_a_word() {
    // bash's delimiter here is `EOF\r`: the body ends at that line only.
    let toks = lex("cat <<'EOF\r'\nx\nEOF\r\nsudo id");
    assert_eq!(words(&toks), vec!["cat", "sudo", "id"]);
    let toks = lex("cat <<EOF\r\nx\nEOF\r\nsudo id");
    assert!(words(&toks).contains(&"sudo".to_string()), "{toks:?}");
}

#[test]
fn locale_strings_are_double_quoted() {
    assert_eq!(words(&lex("$\"sudo\" id")), vec!["sudo", "id"]);
}

#[test]
fn arithmetic_only_when_the_parentheses_close_together() {
    // `((sudo id) )`: two subshells.
    let toks = lex("((sudo id) )");
    assert_eq!(toks[0], Tok::Sep(Sep::Open));
    assert_eq!(words(&toks), vec!["sudo", "id"]);
    assert_eq!(words(&lex("(( x = 1 << 2 ))")), vec!["(( x = 1 << 2 ))"]);
    // `$((sudo id) )`: a substitution of a subshell.
    assert_eq!(words(&lex("echo $((sudo id) )")), vec!["echo", "$((sudo id) )"]);
    assert_eq!(words(&lex("echo $((1 + 2))")), vec!["echo", "${((1 + 2))}"]);
    // `$[…]` is arithmetic, its `<<` a shift.
    assert_eq!(
        words(&lex("echo $[1<<2]\nsudo id")),
        vec!["echo", "${((1<<2))}", "sudo", "id"]
    );
}

#[test]
fn descriptor_duplications_are_kept_without_a_target() {
    let toks = lex("sh <&3 x");
    assert!(toks.contains(&Tok::Redir("<&3".into())), "{toks:?}");
    assert_eq!(words(&toks), vec!["sh", "x"]);
    assert!(
        lex("a && b || c")
            .iter()
            .filter(|t| **t == Tok::Sep(Sep::AndOr))
            .count()
            == 2
    );
}

#[test]
fn a_lexer_that_would_retry_too_long_gives_up() {
    let toks = lex(&"((".repeat(20_000));
    assert!(toks.contains(&Tok::Unreadable), "gave up rather than rescanned");
}
