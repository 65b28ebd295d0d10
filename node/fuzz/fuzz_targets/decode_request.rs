//! Request decoding: any bytes as a request frame must give a request or an error, never a
//! panic; decoded Produce records go through the log's batch validation too.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::RequestKind;
use libfuzzer_sys::fuzz_target;
use node::server::frame::{decode_request, Decoded};

fuzz_target!(|data: &[u8]| {
    if let Ok(Decoded::Request { body, .. }) = decode_request(Bytes::copy_from_slice(data)) {
        let RequestKind::Produce(p) = *body else { return };
        for t in p.topic_data {
            for pd in t.partition_data {
                if let Some(records) = pd.records {
                    let _ = iouring_log::BatchHeader::parse_validated(&records);
                }
            }
        }
    }
});
