//! `agent trace show`: renders trace lines for people, one line per event starting
//! with its step and raw `event_type`. Reads only.

use std::io::{self, BufRead, Read, Write};

use serde_json::Value;

/// How a `show` pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShowReport {
    /// Lines rendered.
    pub shown: usize,
    /// Lines reported as malformed.
    pub malformed: usize,
}

/// The longest line `show` reads; a longer one is reported as malformed and skipped
/// without being held in memory. Far above any line the trace writer emits.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Renders every line of `input` to `out`; malformed lines (not JSON, not UTF-8,
/// longer than [`MAX_LINE_BYTES`]) are reported on `err` with their 1-based line
/// number, and the rest is still shown. Memory stays bounded by one line. A closed
/// `out` (a broken pipe) ends the pass quietly.
pub fn show(
    mut input: impl BufRead,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<ShowReport> {
    let mut report = ShowReport::default();
    let mut buffer = Vec::new();
    let mut number = 0;
    loop {
        number += 1;
        let line = match next_line(&mut input, &mut buffer)? {
            Line::End => break,
            Line::TooLong => {
                report.malformed += 1;
                writeln!(
                    err,
                    "line {number}: malformed trace line: longer than {MAX_LINE_BYTES} bytes"
                )?;
                continue;
            }
            Line::Text => match std::str::from_utf8(&buffer) {
                Ok(line) => line,
                Err(_) => {
                    report.malformed += 1;
                    writeln!(err, "line {number}: malformed trace line: not UTF-8")?;
                    continue;
                }
            },
        };
        if line.trim().is_empty() {
            continue;
        }
        match render(line) {
            Ok(text) => {
                report.shown += 1;
                match writeln!(out, "{text}") {
                    Ok(()) => {}
                    Err(error) if error.kind() == io::ErrorKind::BrokenPipe => return Ok(report),
                    Err(error) => return Err(error),
                }
            }
            Err(reason) => {
                report.malformed += 1;
                writeln!(err, "line {number}: malformed trace line: {reason}")?;
            }
        }
    }
    match out.flush() {
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(report),
        other => other.map(|()| report),
    }
}

enum Line {
    /// `buffer` holds the next line, without its newline.
    Text,
    /// The next line was longer than the cap and has been skipped.
    TooLong,
    /// Nothing is left.
    End,
}

/// Reads the next line into `buffer`, holding at most [`MAX_LINE_BYTES`] of it.
fn next_line(input: &mut impl BufRead, buffer: &mut Vec<u8>) -> io::Result<Line> {
    buffer.clear();
    let limit = u64::try_from(MAX_LINE_BYTES + 1).unwrap_or(u64::MAX);
    let read = input.by_ref().take(limit).read_until(b'\n', buffer)?;
    if read == 0 {
        return Ok(Line::End);
    }
    if buffer.last() == Some(&b'\n') {
        buffer.pop();
        return Ok(Line::Text);
    }
    if buffer.len() <= MAX_LINE_BYTES {
        return Ok(Line::Text);
    }
    buffer.clear();
    skip_rest_of_line(input)?;
    Ok(Line::TooLong)
}

/// Consumes input up to and including the next newline, a buffer at a time.
fn skip_rest_of_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|&byte| byte == b'\n') {
            Some(end) => {
                input.consume(end + 1);
                return Ok(());
            }
            None => {
                let length = available.len();
                input.consume(length);
            }
        }
    }
}

/// One trace line as `STEP EVENT_TYPE key=value …`, or why it is malformed.
pub fn render(line: &str) -> Result<String, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let Value::Object(fields) = value else {
        return Err("not a JSON object".into());
    };
    let step = fields
        .get("step")
        .and_then(Value::as_u64)
        .ok_or("no integer `step`")?;
    let event_type = fields
        .get("event_type")
        .and_then(Value::as_str)
        .ok_or("no string `event_type`")?;
    let mut text = format!("{step:>3} {event_type}");
    for (key, value) in &fields {
        if matches!(
            key.as_str(),
            "step" | "event_type" | "run_id" | "seq" | "at_ms"
        ) {
            continue;
        }
        match value {
            Value::String(s) => text.push_str(&format!(" {key}={s}")),
            other => text.push_str(&format!(" {key}={other}")),
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_step_and_type_first_then_fields() {
        let text = render(
            r#"{"run_id":"r","step":1,"event_type":"observation","tool_name":"calculator","is_error":false}"#,
        )
        .unwrap();
        assert_eq!(text, "  1 observation tool_name=calculator is_error=false");
    }

    #[test]
    fn a_broken_line_is_reported_by_number_and_the_rest_shown() {
        let input = "{\"step\":0,\"event_type\":\"run_started\"}\n{broken\n\n[1]\n{\"step\":1,\"event_type\":\"run_finished\"}\n";
        let mut out = Vec::new();
        let mut err = Vec::new();
        let report = show(input.as_bytes(), &mut out, &mut err).unwrap();
        assert_eq!(
            report,
            ShowReport {
                shown: 2,
                malformed: 2
            }
        );
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out, "  0 run_started\n  1 run_finished\n");
        let err = String::from_utf8(err).unwrap();
        assert!(err.contains("line 2: malformed trace line"), "{err}");
        assert!(
            err.contains("line 4: malformed trace line: not a JSON object"),
            "{err}"
        );
    }

    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
    }

    #[test]
    fn a_line_past_the_cap_is_reported_and_skipped_in_bounded_memory() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\n{\"step\":3,\"event_type\":\"run_finished\"}\n");
        let mut out = Vec::new();
        let mut err = Vec::new();
        let report = show(input.as_slice(), &mut out, &mut err).unwrap();
        assert_eq!(
            report,
            ShowReport {
                shown: 1,
                malformed: 1
            }
        );
        assert_eq!(String::from_utf8(out).unwrap(), "  3 run_finished\n");
        assert!(
            String::from_utf8(err)
                .unwrap()
                .contains("line 1: malformed trace line: longer than"),
        );
    }

    #[test]
    fn an_endless_line_without_newline_ends() {
        let zeros = io::repeat(0).take(u64::try_from(MAX_LINE_BYTES * 3).unwrap());
        let report = show(io::BufReader::new(zeros), &mut Vec::new(), &mut Vec::new()).unwrap();
        assert_eq!(
            report,
            ShowReport {
                shown: 0,
                malformed: 1
            }
        );
    }

    #[test]
    fn a_closed_pipe_ends_quietly() {
        let input = "{\"step\":0,\"event_type\":\"run_started\"}\n".repeat(3);
        let report = show(input.as_bytes(), &mut ClosedPipe, &mut Vec::new()).unwrap();
        assert_eq!(report.shown, 1);
    }
}
