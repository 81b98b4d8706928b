//! Server-sent events, incrementally: bytes in as they arrive, `data:` payloads (and event names) out.
//! Handles events split across chunks, CRLF line ends, comments and multi-line data.

#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    data: String,
    event: String,
}

impl SseParser {
    /// Feeds bytes; calls `on_data` with each complete event's data.
    pub fn push(&mut self, bytes: &[u8], on_data: &mut dyn FnMut(&str)) {
        self.push_events(bytes, &mut |_, data| on_data(data));
    }

    /// Feeds bytes; calls `on_event` with each complete event's name (`message` when it has none) and data.
    pub fn push_events(&mut self, bytes: &[u8], on_event: &mut dyn FnMut(&str, &str)) {
        self.buffer.extend_from_slice(bytes);
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if !self.data.is_empty() {
                    let name = if self.event.is_empty() { "message" } else { self.event.as_str() };
                    on_event(name, &self.data);
                    self.data.clear();
                }
                self.event.clear();
            } else if let Some(value) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            } else if let Some(value) = line.strip_prefix("event:") {
                self.event = value.trim().to_string();
            }
            // `id:`, `retry:` and `:` comments carry nothing we use.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let stream =
            b": keep-alive\r\ndata: {\"a\":1}\r\n\r\ndata: line one\ndata: line two\n\nevent: x\ndata: [DONE]\n\n";
        for split in 1..stream.len() {
            let mut parser = SseParser::default();
            let mut out = Vec::new();
            parser.push(&stream[..split], &mut |d| out.push(d.to_string()));
            parser.push(&stream[split..], &mut |d| out.push(d.to_string()));
            assert_eq!(out, ["{\"a\":1}", "line one\nline two", "[DONE]"], "split at {split}");
        }
    }

    #[test]
    fn event_names_come_with_their_data() {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        parser.push_events(b"event: endpoint\ndata: /messages?s=1\n\ndata: {}\n\n", &mut |e, d| {
            out.push((e.to_string(), d.to_string()))
        });
        assert_eq!(out, [("endpoint".into(), "/messages?s=1".into()), ("message".into(), "{}".into())]);
    }
}
