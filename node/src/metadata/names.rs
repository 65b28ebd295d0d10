//! Topic names: Kafka's naming rule and its internal topics.

use kafka_protocol::ResponseError;

use crate::error::Refused;
use crate::limits::TOPIC_NAME_MAX;

/// The group coordinator's topic (Kafka's name and record layout).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The transaction coordinator's topic (Kafka's name and record layout).
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Kafka's internal topics: written only by the broker itself.
pub fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TRANSACTION_STATE_TOPIC
}

/// INVALID_TOPIC_EXCEPTION for an internal topic asked to be `what`.
pub fn refuse_internal(name: &str, what: &str) -> Result<(), Refused> {
    if is_internal(name) {
        return Err(Refused::new(
            ResponseError::InvalidTopicException,
            format!("'{name}' is an internal topic and cannot be {what}"),
        ));
    }
    Ok(())
}

/// Kafka's topic name rule: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`
/// (INVALID_TOPIC_EXCEPTION otherwise).
pub fn validate_topic_name(name: &str) -> Result<(), Refused> {
    let invalid = |m: String| Err(Refused::new(ResponseError::InvalidTopicException, m));
    if name.is_empty() || name == "." || name == ".." {
        return invalid(format!("topic name '{name}' is not allowed"));
    }
    if name.len() > TOPIC_NAME_MAX {
        return invalid(format!(
            "topic name is {} characters; the limit is {TOPIC_NAME_MAX}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return invalid(format!(
            "topic name '{name}' contains '{c}'; allowed are ASCII letters, digits, '.', '_', '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }
}
