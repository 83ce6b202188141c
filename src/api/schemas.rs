//! Schemas the derives cannot state: a rate limit that is a number or a
//! word, and the items of an endpoint's event-type filter. The document
//! says what validation refuses, so a client (and `make fuzz`) can tell a
//! valid request from an invalid one before sending it.

use utoipa::openapi::{
    schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type},
    RefOr, Schema,
};

/// `rate_limit_per_sec`: 1 to 10 000 starts a second, or `"unlimited"`.
pub struct RateLimitSchema;

impl utoipa::PartialSchema for RateLimitSchema {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                        utoipa::openapi::KnownFormat::Int64,
                    )))
                    .minimum(Some(1))
                    .maximum(Some(crate::endpoints::MAX_RATE_LIMIT)),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["unlimited"])),
            )
            .description(Some("Starts per second (1 to 10000), or \"unlimited\""))
            .into()
    }
}

impl utoipa::ToSchema for RateLimitSchema {
    fn name() -> std::borrow::Cow<'static, str> {
        "RateLimit".into()
    }
}

/// An endpoint's event-type filter: at most 100 types of 1 to 255
/// characters, each with something besides spaces.
pub struct EventTypeFilter;

impl utoipa::PartialSchema for EventTypeFilter {
    fn schema() -> RefOr<Schema> {
        ArrayBuilder::new()
            .items(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(255))
                    .pattern(Some(NOT_ALL_SPACE)),
            )
            .max_items(Some(100))
            .description(Some("Event types delivered here; empty for every type"))
            .into()
    }
}

impl utoipa::ToSchema for EventTypeFilter {}

/// Some character that is not white space (Rust's `char::is_whitespace`,
/// spelled out: regex `\s` differs between dialects).
const NOT_ALL_SPACE: &str =
    "[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
