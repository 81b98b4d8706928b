//! Words as LiveKit carries them: `lk.transcription` text streams (a header, chunks of UTF-8 text, a
//! trailer: LiveKit's data streams) in reliable data packets, each sender's packets numbered from 1 (the
//! clients drop a reliable packet whose `sequence` does not rise). The agent's words go out twice per
//! segment, as LiveKit's agents send them and TruGen's SDK reads them: an interim stream
//! (`lk.transcription_final` = `false`) when it starts speaking, a final one (`true`) with what was heard
//! when it stops (truncated on an interruption); the person's committed utterance is one final stream on
//! their identity.

use std::collections::HashMap;

use livekit_protocol as proto;
use proto::data_stream;

use super::room::Member;

pub const TOPIC: &str = "lk.transcription";
pub const FINAL: &str = "lk.transcription_final";
pub const SEGMENT_ID: &str = "lk.segment_id";
pub const TRANSCRIBED_TRACK_ID: &str = "lk.transcribed_track_id";
/// Largest chunk of a stream (LiveKit's clients send at most 15 000 bytes a chunk).
pub const CHUNK_BYTES: usize = 15_000;

/// One transcription stream to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub segment_id: String,
    /// The track whose speech this is.
    pub track_sid: String,
    pub text: String,
    pub is_final: bool,
}

/// The reliable sequence of each sender.
#[derive(Default)]
pub struct TextStreams {
    sequences: HashMap<String, u32>,
}

impl TextStreams {
    /// The data packets of `transcript` as `sender` says it: header, chunks, trailer.
    pub fn packets(&mut self, sender: &Member, transcript: &Transcript, now_ms: i64) -> Vec<proto::DataPacket> {
        let stream_id = uuid::Uuid::new_v4().to_string();
        let attributes = HashMap::from([
            (FINAL.to_string(), transcript.is_final.to_string()),
            (SEGMENT_ID.to_string(), transcript.segment_id.clone()),
            (TRANSCRIBED_TRACK_ID.to_string(), transcript.track_sid.clone()),
        ]);
        let header = data_stream::Header {
            stream_id: stream_id.clone(),
            timestamp: now_ms,
            topic: TOPIC.to_string(),
            mime_type: "text/plain".to_string(),
            total_length: Some(transcript.text.len() as u64),
            attributes,
            content_header: Some(data_stream::header::ContentHeader::TextHeader(data_stream::TextHeader {
                operation_type: data_stream::OperationType::Create as i32,
                generated: true,
                ..Default::default()
            })),
            ..Default::default()
        };
        let mut values = vec![proto::data_packet::Value::StreamHeader(header)];
        for (index, chunk) in chunks(&transcript.text, CHUNK_BYTES).enumerate() {
            values.push(proto::data_packet::Value::StreamChunk(data_stream::Chunk {
                stream_id: stream_id.clone(),
                chunk_index: index as u64,
                content: chunk.as_bytes().to_vec(),
                ..Default::default()
            }));
        }
        values.push(proto::data_packet::Value::StreamTrailer(data_stream::Trailer { stream_id, ..Default::default() }));
        values.into_iter().map(|value| self.packet(sender, value)).collect()
    }

    fn packet(&mut self, sender: &Member, value: proto::data_packet::Value) -> proto::DataPacket {
        let sequence = self.sequences.entry(sender.sid.clone()).or_insert(0);
        *sequence += 1;
        #[allow(deprecated)] // `kind` is deprecated but older clients still read it
        proto::DataPacket {
            kind: proto::data_packet::Kind::Reliable as i32,
            participant_identity: sender.identity.clone(),
            participant_sid: sender.sid.clone(),
            sequence: *sequence,
            value: Some(value),
            ..Default::default()
        }
    }
}

/// `text` in pieces of at most `limit` bytes, cut between characters.
fn chunks(text: &str, limit: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(limit);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(sid: &str) -> Member {
        Member { sid: sid.into(), identity: format!("{sid}-identity"), name: String::new() }
    }

    #[test]
    fn a_stream_is_a_header_its_text_and_a_trailer_numbered_per_sender() {
        let mut streams = TextStreams::default();
        let transcript =
            Transcript { segment_id: "SG_1".into(), track_sid: "TR_1".into(), text: "Paris.".into(), is_final: true };
        let agent = member("PA_agent");
        let packets = streams.packets(&agent, &transcript, 1000);
        assert_eq!(packets.iter().map(|p| p.sequence).collect::<Vec<_>>(), [1, 2, 3]);
        let Some(proto::data_packet::Value::StreamHeader(header)) = &packets[0].value else { panic!() };
        assert_eq!((header.topic.as_str(), header.attributes[FINAL].as_str()), (TOPIC, "true"));
        assert_eq!(header.attributes[SEGMENT_ID], "SG_1");
        let Some(proto::data_packet::Value::StreamChunk(chunk)) = &packets[1].value else { panic!() };
        assert_eq!(
            (chunk.content.as_slice(), chunk.stream_id.as_str()),
            (b"Paris.".as_slice(), header.stream_id.as_str())
        );
        assert!(matches!(&packets[2].value, Some(proto::data_packet::Value::StreamTrailer(_))));
        assert!(packets.iter().all(|p| p.participant_identity == "PA_agent-identity"));
        let user = streams.packets(&member("PA_user"), &transcript, 1000);
        assert_eq!(user[0].sequence, 1, "each sender counts its own packets");
        assert_eq!(streams.packets(&agent, &transcript, 1000)[0].sequence, 4);
    }

    #[test]
    fn long_text_is_cut_between_characters() {
        let text = "é".repeat(10_000); // 20 000 bytes
        let pieces: Vec<&str> = chunks(&text, CHUNK_BYTES).collect();
        assert_eq!(pieces.len(), 2);
        assert!(pieces.iter().all(|piece| piece.len() <= CHUNK_BYTES));
        assert_eq!(pieces.concat(), text);
    }
}
