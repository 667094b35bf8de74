//! The words of a finish as a text-format model writes them: the model writes
//! `{"type": "finish", "answer": "…"}` (the action grammar puts `type` first),
//! and [`AnswerText`] turns the generated characters into the decoded answer as
//! they come, so a person sees the answer, not JSON. Any other action (a tool
//! call, a plan, text that is not the finish form) shows nothing.

/// What a finish starts with, whitespace between tokens aside.
const FINISH_PREFIX: &str = r#"{"type":"finish","answer":""#;

#[derive(Debug)]
enum Place {
    /// Reading the opening of the object; holds its characters but whitespace.
    Opening(String),
    /// Inside the answer string.
    Answer,
    /// After a backslash in the answer.
    Escape,
    /// Reading the hex digits of a `\u` escape.
    Unicode(String),
    /// The answer ended, or this is not a finish.
    Done,
}

/// Decodes the answer of a finish from its JSON text, piece by piece.
#[derive(Debug)]
pub struct AnswerText {
    place: Place,
    /// A high surrogate waiting for its low half.
    high: Option<u32>,
}

impl Default for AnswerText {
    fn default() -> Self {
        Self {
            place: Place::Opening(String::new()),
            high: None,
        }
    }
}

impl AnswerText {
    /// The answer text that `piece` of the generated JSON adds.
    pub fn feed(&mut self, piece: &str) -> String {
        let mut out = String::new();
        for c in piece.chars() {
            self.step(c, &mut out);
        }
        out
    }

    fn step(&mut self, c: char, out: &mut String) {
        match &mut self.place {
            Place::Opening(seen) => {
                if c.is_whitespace() {
                    return;
                }
                seen.push(c);
                if seen == FINISH_PREFIX {
                    self.place = Place::Answer;
                } else if !FINISH_PREFIX.starts_with(seen.as_str()) {
                    self.place = Place::Done;
                }
            }
            Place::Answer => match c {
                '\\' => self.place = Place::Escape,
                '"' => self.place = Place::Done,
                c => self.emit(c, out),
            },
            Place::Escape => {
                self.place = Place::Answer;
                let decoded = match c {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'u' => {
                        self.place = Place::Unicode(String::new());
                        return;
                    }
                    other => other,
                };
                self.emit(decoded, out);
            }
            Place::Unicode(digits) => {
                digits.push(c);
                if digits.len() < 4 {
                    return;
                }
                let code = u32::from_str_radix(digits, 16).unwrap_or(0xFFFD);
                self.place = Place::Answer;
                match (self.high.take(), code) {
                    (None, 0xD800..=0xDBFF) => self.high = Some(code),
                    (Some(high), 0xDC00..=0xDFFF) => {
                        let joined = 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00);
                        out.push(char::from_u32(joined).unwrap_or('\u{FFFD}'));
                    }
                    (_, code) => out.push(char::from_u32(code).unwrap_or('\u{FFFD}')),
                }
            }
            Place::Done => {}
        }
    }

    fn emit(&mut self, c: char, out: &mut String) {
        if self.high.take().is_some() {
            out.push('\u{FFFD}');
        }
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(pieces: &[&str]) -> String {
        let mut answer = AnswerText::default();
        pieces.iter().map(|piece| answer.feed(piece)).collect()
    }

    #[test]
    fn a_finish_yields_its_answer_decoded_as_it_comes() {
        assert_eq!(
            decoded(&[
                "{\"type\"",
                ": \"fin",
                "ish\", \"ans",
                "wer\": \"12 times",
                " 7 is \\\"84\\\"",
                "\\n\\u00e9\\ud83d\\ude00\"}"
            ]),
            "12 times 7 is \"84\"\né😀"
        );
    }

    #[test]
    fn other_actions_show_nothing() {
        assert_eq!(
            decoded(&[
                r#"{"type":"tool_call","tool_name":"calculator","arguments":{"answer":"x"}}"#
            ]),
            ""
        );
        assert_eq!(
            decoded(&["```json\n{\"type\":\"finish\",\"answer\":\"x\"}"]),
            ""
        );
        assert_eq!(decoded(&[r#"[{"type":"finish","answer":"x"}]"#]), "");
    }
}
