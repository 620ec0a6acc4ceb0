//! Frame codec for the private pipe protocol (SPEC W3): a 4-byte big-endian `u32` length, then
//! that many bytes of UTF-8 JSON. Frames longer than the codec's maximum are refused before any
//! of their body is buffered, so a misbehaving peer cannot make the supervisor allocate more than
//! one bounded frame.

use std::marker::PhantomData;

use bytes::{Buf, BufMut, BytesMut};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::codec::{Decoder, Encoder};

/// Length of the frame header in bytes (big-endian `u32`).
pub const HEADER_BYTES: usize = 4;
/// W3: largest control frame the supervisor sends to a worker (1 MiB). Requests carry no source.
pub const MAX_REQUEST_FRAME: usize = 1024 * 1024;
/// W3: output cap for one discovery result (2 MiB of scopes JSON).
pub const OUTPUT_CAP: usize = 2 * 1024 * 1024;
/// W3: largest frame the supervisor accepts from a worker: the 2 MiB output cap plus 64 KiB for
/// the envelope (ids, timings, error text).
pub const MAX_RESPONSE_FRAME: usize = OUTPUT_CAP + 64 * 1024;

/// A framing fault (W4: any of these retires the generation).
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The header announced more than the codec's maximum.
    #[error("frame of {len} bytes exceeds the {max}-byte limit")]
    Oversize { len: usize, max: usize },
    /// The body is not UTF-8.
    #[error("frame body is not UTF-8: {0}")]
    NotUtf8(std::str::Utf8Error),
    /// The body is UTF-8 but not the expected JSON message.
    #[error("frame body is not a valid message: {0}")]
    InvalidJson(serde_json::Error),
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame ({buffered} bytes buffered)")]
    Truncated { buffered: usize },
    /// Reading or writing the pipe failed.
    #[error("pipe I/O failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Length-prefixed JSON codec: decodes frames into `In`, encodes `Out`, each bounded by its own
/// maximum length in bytes (excluding the 4-byte header).
#[derive(Debug)]
pub struct FrameCodec<In, Out> {
    max_decode: usize,
    max_encode: usize,
    _types: PhantomData<fn(Out) -> In>,
}

impl<In, Out> FrameCodec<In, Out> {
    /// A codec that refuses to decode frames over `max_decode` bytes and to encode frames over
    /// `max_encode` bytes.
    pub fn new(max_decode: usize, max_encode: usize) -> Self {
        Self {
            max_decode,
            max_encode,
            _types: PhantomData,
        }
    }

    /// Largest body accepted when decoding, in bytes.
    pub fn max_decode(&self) -> usize {
        self.max_decode
    }
}

impl<In: DeserializeOwned, Out> Decoder for FrameCodec<In, Out> {
    type Item = In;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<In>, FrameError> {
        if src.len() < HEADER_BYTES {
            return Ok(None);
        }
        let mut header = [0u8; HEADER_BYTES];
        header.copy_from_slice(&src[..HEADER_BYTES]);
        let len = u32::from_be_bytes(header) as usize;
        if len > self.max_decode {
            return Err(FrameError::Oversize {
                len,
                max: self.max_decode,
            });
        }
        if src.len() < HEADER_BYTES + len {
            src.reserve(HEADER_BYTES + len - src.len());
            return Ok(None);
        }
        src.advance(HEADER_BYTES);
        let body = src.split_to(len);
        let text = std::str::from_utf8(&body).map_err(FrameError::NotUtf8)?;
        serde_json::from_str(text)
            .map(Some)
            .map_err(FrameError::InvalidJson)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<In>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(FrameError::Truncated {
                buffered: src.len(),
            }),
        }
    }
}

impl<In, Out: Serialize> Encoder<Out> for FrameCodec<In, Out> {
    type Error = FrameError;

    fn encode(&mut self, item: Out, dst: &mut BytesMut) -> Result<(), FrameError> {
        let body = serde_json::to_vec(&item).map_err(FrameError::InvalidJson)?;
        if body.len() > self.max_encode {
            return Err(FrameError::Oversize {
                len: body.len(),
                max: self.max_encode,
            });
        }
        let len = u32::try_from(body.len()).map_err(|_| FrameError::Oversize {
            len: body.len(),
            max: self.max_encode,
        })?;
        dst.reserve(HEADER_BYTES + body.len());
        dst.put_u32(len);
        dst.extend_from_slice(&body);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Msg {
        generation: u64,
        request: u64,
        text: String,
    }

    fn codec() -> FrameCodec<Msg, Msg> {
        FrameCodec::new(64, 64)
    }

    fn frame(body: &[u8]) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_u32(body.len() as u32);
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn frame_round_trips_including_multibyte_text() {
        let msg = Msg {
            generation: 3,
            request: 7,
            text: "界😀é".into(),
        };
        let mut buf = BytesMut::new();
        codec().encode(msg.clone(), &mut buf).expect("encode");
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        assert_eq!(len, buf.len() - HEADER_BYTES);
        let decoded = codec().decode(&mut buf).expect("decode").expect("a frame");
        assert_eq!(decoded, msg);
        assert!(buf.is_empty());
    }

    #[test]
    fn partial_frames_wait_for_more_bytes_and_two_frames_split_cleanly() {
        let a = Msg {
            generation: 1,
            request: 1,
            text: "a".into(),
        };
        let b = Msg {
            generation: 1,
            request: 2,
            text: "b".into(),
        };
        let mut all = BytesMut::new();
        codec().encode(a.clone(), &mut all).expect("encode");
        codec().encode(b.clone(), &mut all).expect("encode");
        let mut c = codec();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for byte in all.iter() {
            buf.put_u8(*byte);
            while let Some(m) = c.decode(&mut buf).expect("decode") {
                out.push(m);
            }
        }
        assert_eq!(out, vec![a, b]);
    }

    #[test]
    fn a_frame_of_exactly_the_maximum_is_decoded_and_encoded() {
        // Found by cargo-mutants (`len > max` → `>=`): the bound is inclusive, so a response of
        // exactly the cap (W3: 2 MiB in the product; 64 bytes here) is still an answer.
        let body = br#"{"generation":1,"request":2,"text":"xxxxxxxxxxxxxxxxxxxxxxxxxx"}"#;
        assert_eq!(body.len(), 64);
        let mut buf = frame(body);
        let decoded = codec().decode(&mut buf).expect("decode").expect("a frame");
        assert_eq!(decoded.text.len(), 26);
        assert_eq!(codec().max_decode(), 64);
        // And encoding a message of exactly the maximum succeeds (same inclusive bound).
        let mut out = BytesMut::new();
        codec()
            .encode(decoded, &mut out)
            .expect("encode at the maximum");
        assert_eq!(&out[HEADER_BYTES..], &body[..]);
    }

    #[test]
    fn oversize_header_is_refused_before_the_body_arrives() {
        let mut buf = BytesMut::new();
        buf.put_u32(65);
        let err = codec().decode(&mut buf).expect_err("oversize");
        assert!(matches!(err, FrameError::Oversize { len: 65, max: 64 }));
        let mut huge = BytesMut::new();
        huge.put_u32(u32::MAX);
        assert!(matches!(
            codec().decode(&mut huge),
            Err(FrameError::Oversize { .. })
        ));
    }

    #[test]
    fn oversize_message_is_refused_on_encode() {
        let msg = Msg {
            generation: 1,
            request: 1,
            text: "x".repeat(100),
        };
        let mut buf = BytesMut::new();
        assert!(matches!(
            codec().encode(msg.clone(), &mut buf),
            Err(FrameError::Oversize { .. })
        ));
        assert!(buf.is_empty());
    }

    #[test]
    fn non_utf8_body_is_a_framing_error() {
        let mut buf = frame(&[0xff, 0xfe, 0x7b, 0x7d]);
        assert!(matches!(
            codec().decode(&mut buf),
            Err(FrameError::NotUtf8(_))
        ));
    }

    #[test]
    fn invalid_json_and_wrong_shape_are_framing_errors() {
        let mut buf = frame(b"{not json");
        assert!(matches!(
            codec().decode(&mut buf),
            Err(FrameError::InvalidJson(_))
        ));
        let wrong = serde_json::to_vec(&json!({"generation": "x"})).expect("json");
        let mut buf = frame(&wrong);
        assert!(matches!(
            codec().decode(&mut buf),
            Err(FrameError::InvalidJson(_))
        ));
        let mut empty = frame(b"");
        assert!(matches!(
            codec().decode(&mut empty),
            Err(FrameError::InvalidJson(_))
        ));
    }

    #[test]
    fn eof_inside_a_frame_is_truncation() {
        let mut buf = frame(b"{\"generation\":1");
        buf.truncate(8);
        assert!(matches!(
            codec().decode_eof(&mut buf),
            Err(FrameError::Truncated { buffered: 8 })
        ));
        let mut empty = BytesMut::new();
        assert!(codec().decode_eof(&mut empty).expect("clean eof").is_none());
    }

    #[test]
    fn product_limits_match_the_spec() {
        assert_eq!(OUTPUT_CAP, 2 * 1024 * 1024);
        assert_eq!(MAX_REQUEST_FRAME, 1 << 20);
        assert_eq!(MAX_RESPONSE_FRAME, OUTPUT_CAP + 65_536);
    }
}
