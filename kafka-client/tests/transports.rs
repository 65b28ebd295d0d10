//! Both transports against a tiny fake broker on loopback that answers ApiVersions the way a
//! Kafka broker frames it: every request decoded and answered in order, with its correlation id.

use std::io::{Read, Write};
use std::net::TcpListener;

use bytes::{Bytes, BytesMut};
use kafka_client::blocking::{self, ConnectOptions};
use kafka_client::security::ClientSecurity;
use kafka_protocol::messages::api_versions_response::{ApiVersion, SupportedFeatureKey};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Serves one connection: answers each ApiVersions request with one entry whose max version
/// is the request's correlation id, so a test can tell answers apart.
fn fake_broker() -> String {
    fake_broker_with(1, usize::MAX)
}

/// [`fake_broker`], answering with `entries` api keys (the first carries the correlation id)
/// and, from v3, a supported feature named `feature-<correlation id>` (a string the decoded
/// response holds as bytes of the response buffer), writing each response frame in pieces of
/// `piece` bytes, a millisecond apart.
fn fake_broker_with(entries: usize, piece: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        loop {
            let mut len = [0u8; 4];
            if s.read_exact(&mut len).is_err() {
                return;
            }
            let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
            s.read_exact(&mut frame).unwrap();
            let mut frame = Bytes::from(frame);
            let version = i16::from_be_bytes([frame[2], frame[3]]);
            let header = RequestHeader::decode(
                &mut frame,
                ApiKey::ApiVersions.request_header_version(version),
            )
            .unwrap();
            ApiVersionsRequest::decode(&mut frame, version).unwrap();
            let mut resp = ApiVersionsResponse::default();
            let mut v = ApiVersion::default();
            v.api_key = 18;
            v.max_version = header.correlation_id as i16;
            resp.api_keys = vec![v; entries];
            if version >= 3 {
                let mut f = SupportedFeatureKey::default();
                f.name = StrBytes::from_string(format!("feature-{}", header.correlation_id));
                resp.supported_features = vec![f];
            }
            let mut out = BytesMut::new();
            let mut rh = ResponseHeader::default();
            rh.correlation_id = header.correlation_id;
            rh.encode(
                &mut out,
                ApiKey::ApiVersions.response_header_version(version),
            )
            .unwrap();
            resp.encode(&mut out, version).unwrap();
            let mut frame = (out.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&out);
            let _ = s.set_nodelay(true);
            let mut chunks = frame.chunks(piece.min(frame.len())).peekable();
            while let Some(chunk) = chunks.next() {
                s.write_all(chunk).unwrap();
                if chunks.peek().is_some() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
    });
    addr
}

const OPTIONS: ConnectOptions = ConnectOptions {
    client_id: "transport-test",
    read_timeout: Some(std::time::Duration::from_secs(10)),
};

#[test]
fn blocking_calls_and_pipelined_requests() {
    let addr = fake_broker();
    let (mut tx, mut rx) = blocking::connect(&addr, OPTIONS, &ClientSecurity::plaintext()).unwrap();
    let ids: Vec<i32> = (0..3)
        .map(|_| {
            tx.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
                .unwrap()
        })
        .collect();
    for id in ids {
        let (got, resp): (i32, ApiVersionsResponse) =
            rx.recv_decoded(ApiKey::ApiVersions, 3).unwrap();
        assert_eq!(got, id, "answers in request order");
        assert_eq!(resp.api_keys[0].max_version, id as i16);
    }
    let addr = fake_broker();
    let resp: ApiVersionsResponse = blocking::call(
        &addr,
        OPTIONS,
        &ClientSecurity::plaintext(),
        ApiKey::ApiVersions,
        2,
        &ApiVersionsRequest::default(),
    )
    .unwrap();
    assert_eq!(resp.api_keys[0].max_version, 1);
}

/// Calls on the glommio transport, answered in order: responses arriving whole, in 1-byte
/// pieces (the length prefix split), and larger than the first read's buffer (64 KiB), whole and
/// in 1 000-byte pieces: each decoded whole.
#[cfg(feature = "glommio")]
#[test]
fn glommio_calls_read_responses_however_they_arrive() {
    for (entries, piece) in [
        (1, usize::MAX),
        (3, 1),
        (20_000, 1_000),
        (20_000, usize::MAX),
    ] {
        let addr = fake_broker_with(entries, piece);
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let mut c = kafka_client::async_glommio::Connection::connect(
                    &addr,
                    "transport-test",
                    &ClientSecurity::plaintext(),
                )
                .await
                .unwrap();
                for expected in 1..=3 {
                    let resp: ApiVersionsResponse = c
                        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
                        .await
                        .unwrap();
                    assert_eq!(
                        resp.api_keys.len(),
                        entries,
                        "{entries} entries, {piece}-byte pieces"
                    );
                    assert_eq!(resp.api_keys[0].max_version, expected);
                }
            })
            .expect("executor (ulimit -l >= 512 KiB?)")
            .join()
            .unwrap();
    }
}

/// A response of 16 KiB to 64 KiB is handed to the caller in the connection's first-read buffer
/// (not copied), and the buffer is reused only once the caller dropped every view of it: names
/// decoded from earlier responses, kept while later calls run, still read as they were.
#[cfg(feature = "glommio")]
#[test]
fn glommio_responses_kept_by_the_caller_are_not_overwritten_by_later_calls() {
    // ~7 bytes an entry: ~28 KiB responses.
    let addr = fake_broker_with(4_000, usize::MAX);
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let mut c = kafka_client::async_glommio::Connection::connect(
                &addr,
                "transport-test",
                &ClientSecurity::plaintext(),
            )
            .await
            .unwrap();
            let mut kept = Vec::new();
            for id in 1..=12 {
                let resp: ApiVersionsResponse = c
                    .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
                    .await
                    .unwrap();
                assert_eq!(resp.api_keys.len(), 4_000);
                assert_eq!(
                    resp.supported_features[0].name.as_str(),
                    format!("feature-{id}")
                );
                // Keep every other response's name: the others' buffers go back to the pool
                // and are read into again.
                if id % 2 == 1 {
                    kept.push((id, resp.supported_features[0].name.clone()));
                }
                for (kid, name) in &kept {
                    assert_eq!(name.as_str(), format!("feature-{kid}"), "after call {id}");
                }
            }
        })
        .expect("executor (ulimit -l >= 512 KiB?)")
        .join()
        .unwrap();
}
