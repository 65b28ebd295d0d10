mod api_key;
#[cfg(feature = "broker")]
mod api_versions;
#[cfg(feature = "client")]
mod common;
mod fetch_response;
#[cfg(feature = "client")]
mod integration_tests;
#[cfg(feature = "client")]
mod produce_fetch;
mod request_header;
