//! Maintenance: the periodic jobs of a worker node, each named for what it
//! does.

pub mod alerts;
pub mod mailer;
pub mod retention;
pub mod vacuum;
