//! A small, forgiving shell lexer for the command filter: it turns a command
//! line into words (each a list of quoted, unquoted and expanded parts),
//! separators (`;`, `&&`, `||`, `|`, `&`, newline, parentheses) and
//! redirections. It never fails: an unterminated quote or substitution runs to
//! the end of the input, which is what a conservative filter wants (the text is
//! still looked at). It is not a shell parser; it keeps exactly what the
//! normaliser needs to see through quoting tricks like `s'u'do`, `s\udo`,
//! `"su""do"`, `$'\x73udo'`, `$"sudo"` and `$(echo su)do`.
//!
//! Where the shell and a naive lexer disagree, it follows bash: a carriage
//! return is an ordinary character (so a here-document delimiter `EOF\r`
//! ends only at a line `EOF\r`), `((…) )` and `$((…) )` are subshells and
//! command substitutions (only `((…))` with the two parentheses together is
//! arithmetic), `$[…]` is arithmetic, `<&3` is kept (a shell reading its
//! script from another descriptor), a here-document delimiter is its source
//! text with quotes removed and nothing expanded (`<<${X}` ends at a line
//! `${X}`), and `<(…)`/`>(…)` is a process substitution anywhere in a word
//! (`BASH_ENV=<(…)`). `tests/suite/safety/lexer_fuzz.rs` checks the reading
//! against bash itself.

mod dollar;
mod scan;
#[cfg(test)]
mod tests;

/// One piece of a word.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Unquoted text: globs and braces in it are live.
    Lit(String),
    /// Quoted or escaped text: taken literally.
    Quoted(String),
    /// `$name`, `${name}`, `$1`, `$@`, …
    Var(String),
    /// `${…}` with an operator, `$((…))`: not evaluated.
    Complex(String),
    /// `$(…)` or `` `…` ``: the inner command line.
    Subst(String),
    /// `<(…)` or `>(…)`: the inner command line.
    Proc(String),
}

/// A word: adjacent parts with no unquoted blank between them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Word(pub Vec<Part>);

/// What separates commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sep {
    /// `;`, `&`, newline: the end of a pipeline and of an and-or list.
    List,
    /// `&&`, `||`: the end of a pipeline; the next one runs or not
    /// depending on this one.
    AndOr,
    /// `|` or `|&`: the next command reads this one's output.
    Pipe,
    /// `(`
    Open,
    /// `)`
    Close,
    /// `&` alone: a background job (kept apart for the fork-bomb check).
    Amp,
}

/// A token of a command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Word(Word),
    Sep(Sep),
    /// A redirection operator (`>`, `>>`, `<<<`, `&>`, …); its target is the
    /// next word, except for a descriptor duplication (`<&3`, `>&2`, `<&-`),
    /// whose operator holds the descriptor (see [`is_dup`]).
    Redir(String),
    /// The lexer gave up on the rest of the input (it would cost more than a
    /// line is worth): what follows is unread, so the line is undecided.
    Unreadable,
    /// The body of a here-document, in place of its delimiter word after a
    /// `<<`/`<<-`. `expand` when the delimiter was unquoted (the shell then
    /// runs the substitutions in the body).
    Heredoc {
        body: String,
        expand: bool,
    },
}

/// A here-document whose delimiter has been read but whose body has not.
struct PendingHeredoc {
    /// Index in `toks` of the delimiter word (replaced by the body).
    tok: usize,
    delimiter: String,
    strip_tabs: bool,
    expand: bool,
}

/// Blanks that are not newlines: every Unicode space (U+00A0, U+2000…,
/// U+3000). A carriage return is not one: to the shell it is part of a word.
fn is_blank(c: char) -> bool {
    c != '\n' && c != '\r' && c.is_whitespace()
}

/// A blank to this lexer that the shell reads as part of a word (U+00A0,
/// vertical tab, …): splitting there shows the filter more words, never
/// fewer, except in a here-document delimiter (see `scan.rs`).
fn is_soft_blank(c: char) -> bool {
    is_blank(c) && c != ' ' && c != '\t'
}

/// A redirection operator that duplicates a descriptor (`<&3`, `2>&1`,
/// `<&-`): it takes no target word.
pub fn is_dup(op: &str) -> bool {
    op.contains('&') && op.ends_with(|c: char| c.is_ascii_digit() || c == '-')
}

/// Invisible characters that could hide inside a name (zero-width spaces and
/// joiners, word joiner, BOM, soft hyphen, Mongolian vowel separator).
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{00AD}' | '\u{180E}'
    )
}

/// Lex `input` into tokens.
pub fn lex(input: &str) -> Vec<Tok> {
    let chars: Vec<char> = input.chars().filter(|c| !is_invisible(*c)).collect();
    let mut lx = Lexer::new(chars);
    lx.run();
    lx.toks
}

/// Lex `input` as the inside of double quotes (a here-document body, the
/// word of `${x:-word}`): one word whose substitutions are live.
pub fn lex_quoted(input: &str) -> Word {
    let mut lx = Lexer::new(input.chars().filter(|c| !is_invisible(*c)).collect());
    while let Some(c) = lx.peek(0) {
        if "\\$`".contains(c) {
            lx.word_char(true);
        } else {
            lx.part(Part::Quoted(c.to_string()));
            lx.i += 1;
        }
    }
    lx.flush_lit();
    lx.word
}

struct Lexer {
    s: Vec<char>,
    i: usize,
    toks: Vec<Tok>,
    word: Word,
    /// Unquoted text of the current word not yet pushed as a part.
    lit: String,
    /// The current word has begun (even if it is `''`).
    started: bool,
    /// The next word is a here-document delimiter (`true`: `<<-`, tabs stripped).
    heredoc_next: Option<bool>,
    /// Here-documents whose bodies start after the next newline.
    heredocs: Vec<PendingHeredoc>,
    /// Where the word read as a here-document delimiter starts in `s`.
    delimiter_start: Option<usize>,
    /// Characters the lexer may still scan in vain looking for the `))` of
    /// a `((` that turns out to be two subshells (each failed look is redone
    /// as ordinary text, so without a bound `((((…` would be quadratic).
    retry_budget: usize,
}

impl Lexer {
    fn new(s: Vec<char>) -> Self {
        let len = s.len();
        Lexer {
            s,
            i: 0,
            toks: Vec::new(),
            word: Word::default(),
            lit: String::new(),
            started: false,
            heredoc_next: None,
            heredocs: Vec::new(),
            delimiter_start: None,
            retry_budget: 4 * len + 1024,
        }
    }
}

impl Lexer {
    fn peek(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    fn flush_lit(&mut self) {
        if !self.lit.is_empty() {
            self.word.0.push(Part::Lit(std::mem::take(&mut self.lit)));
        }
    }

    fn part(&mut self, p: Part) {
        self.flush_lit();
        // Adjacent quoted text is one part: a long quoted string stays one
        // allocation rather than one per character.
        match (self.word.0.last_mut(), p) {
            (Some(Part::Quoted(prev)), Part::Quoted(s)) => prev.push_str(&s),
            (_, p) => self.word.0.push(p),
        }
        self.started = true;
    }

    fn end_word(&mut self) {
        self.flush_lit();
        if self.started {
            let word = std::mem::take(&mut self.word);
            if let Some(strip_tabs) = self.heredoc_next.take() {
                let expand = word.0.iter().all(|p| matches!(p, Part::Lit(_) | Part::Var(_)));
                // The shell takes the delimiter's source text with quotes
                // removed and nothing expanded: `<<${X}` ends at `${X}`,
                // `<<$(echo E)` at `$(echo E)`.
                let start = self.delimiter_start.take().unwrap_or(self.i);
                let delimiter = scan::unquoted_source(&self.s[start.min(self.i)..self.i]);
                self.heredocs.push(PendingHeredoc {
                    tok: self.toks.len(),
                    delimiter,
                    strip_tabs,
                    expand,
                });
            }
            self.toks.push(Tok::Word(word));
        }
        self.started = false;
    }

    fn sep(&mut self, sep: Sep, width: usize) {
        self.end_word();
        self.toks.push(Tok::Sep(sep));
        self.i += width;
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '\n' => {
                    self.sep(Sep::List, 1);
                    self.heredoc_bodies();
                }
                ';' => self.sep(Sep::List, 1),
                c if is_blank(c) => {
                    self.end_word();
                    self.i += 1;
                }
                '#' if !self.started => {
                    // A comment runs to the end of the line and is not executed.
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                '&' if self.peek(1) == Some('&') => self.sep(Sep::AndOr, 2),
                '&' if self.peek(1) == Some('>') => self.redir(),
                '&' => self.sep(Sep::Amp, 1),
                '|' if self.peek(1) == Some('|') => self.sep(Sep::AndOr, 2),
                '|' if self.peek(1) == Some('&') => self.sep(Sep::Pipe, 2),
                '|' => self.sep(Sep::Pipe, 1),
                // `(( … ))`: an arithmetic command, where `<<` is a shift, not a
                // here-document. One word `((…))` whose substitutions are live.
                // `((a) )` is two subshells (see `arithmetic_command`).
                '(' if self.peek(1) == Some('(') && !self.started => {
                    if !self.arithmetic_command() {
                        return;
                    }
                }
                '(' => self.sep(Sep::Open, 1),
                ')' => self.sep(Sep::Close, 1),
                // Anywhere in a word, as bash does it (`BASH_ENV=<(…)`,
                // `x<(…)` is `x/dev/fd/63`).
                '<' | '>' if self.peek(1) == Some('(') => {
                    self.i += 2;
                    let inner = self.until_close();
                    self.part(Part::Proc(inner));
                }
                '<' | '>' => {
                    // Digits right before a redirection are a file descriptor, not a word.
                    if self.word.0.is_empty() && self.lit.chars().all(|c| c.is_ascii_digit()) {
                        self.lit.clear();
                        self.started = false;
                    }
                    self.redir();
                }
                _ => {
                    if self.heredoc_next.is_some() && !self.started && self.lit.is_empty() {
                        self.delimiter_start = Some(self.i);
                    }
                    self.word_char(false)
                }
            }
        }
        self.end_word();
    }

    /// A redirection operator at `self.i`.
    fn redir(&mut self) {
        self.end_word();
        let mut op = String::new();
        while let Some(c) = self.peek(0).filter(|c| "<>&|-".contains(*c)) {
            // `>&2`, `2>&1`, `<&3`, `<&-`: a descriptor duplication, kept
            // whole (no target word); `>& file` sends both streams to a file.
            if c == '&' && op.ends_with(['<', '>']) {
                self.i += 1;
                op.push('&');
                let mut fd = false;
                while let Some(d) = self.peek(0).filter(|c| c.is_ascii_digit() || *c == '-') {
                    op.push(d);
                    fd = true;
                    self.i += 1;
                }
                if fd {
                    self.toks.push(Tok::Redir(op));
                    return;
                }
                break;
            }
            if (c == '|' && !op.ends_with('>')) || (c == '-' && op != "<<") || op.len() >= 3 {
                break;
            }
            op.push(c);
            self.i += 1;
        }
        if op == "<<" || op == "<<-" {
            self.heredoc_next = Some(op == "<<-");
        }
        self.toks.push(Tok::Redir(op));
    }

    /// One character of a word (outside double quotes when `dq` is false).
    fn word_char(&mut self, dq: bool) {
        let c = self.peek(0).unwrap_or(' ');
        match c {
            '\\' => {
                self.i += 1;
                match self.peek(0) {
                    Some('\n') => self.i += 1,
                    Some(n) if !dq || "$`\"\\".contains(n) => {
                        self.part(Part::Quoted(n.to_string()));
                        self.i += 1;
                    }
                    Some(_) => self.part(Part::Quoted("\\".into())),
                    None => {}
                }
            }
            '\'' if !dq => {
                self.i += 1;
                let text = self.take_until('\'');
                self.part(Part::Quoted(text));
            }
            '"' if !dq => {
                self.i += 1;
                self.started = true;
                self.flush_lit();
                while let Some(c) = self.peek(0) {
                    if c == '"' {
                        self.i += 1;
                        break;
                    }
                    if "\\$`".contains(c) {
                        self.word_char(true);
                    } else {
                        self.part(Part::Quoted(c.to_string()));
                        self.i += 1;
                    }
                }
            }
            '$' => self.dollar(dq),
            '`' => {
                self.i += 1;
                let mut inner = String::new();
                while let Some(c) = self.peek(0) {
                    self.i += 1;
                    match c {
                        '`' => break,
                        '\\' if self.peek(0).is_some_and(|n| "`$\\".contains(n)) => {
                            inner.push(self.s[self.i]);
                            self.i += 1;
                        }
                        c => inner.push(c),
                    }
                }
                self.part(Part::Subst(inner));
            }
            c => {
                self.lit.push(c);
                self.started = true;
                self.i += 1;
            }
        }
    }
}
