//! Events (SPEC §3): ingest, the one way an event enters the queue (the
//! API, the dashboard's test event and the demo all use it), and the reads
//! both faces show.

mod ingest;
mod read;
mod signed_copy;

pub use ingest::{ingest, Ingested};
pub use read::{
    answer_text, cursor, detail, list, parse_answer, parse_cursor, types, AttemptInfo,
    DeliveryInfo, EventInfo,
};
pub use signed_copy::{signed_copy, SignedCopy};
