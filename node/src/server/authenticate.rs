//! A connection's authentication: the principal of a TLS client certificate, and SASL's
//! SaslHandshake and SaslAuthenticate run against the connection's [`SaslSession`]. Failures
//! are answered after `connection.failed.authentication.delay.ms`, then the connection closes;
//! they are logged, rate-limited, by the shard's `security::failure_log::FailureLog`.

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::sasl_authenticate_request::SaslAuthenticateRequest;
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::handlers::groups::Client;
use crate::security::sasl::{Authenticated, Gate, SaslSession};
use crate::security::tls::subject_name;
use crate::security::{user_principal, ANONYMOUS};
use crate::server::frame::ConnectionError;
use crate::shard::ShardCtx;

/// The principal of a TLS connection: `User:<certificate subject>` (RFC 2253, as Kafka's
/// default principal builder), `User:ANONYMOUS` without a client certificate.
pub fn certificate_principal<IO>(tls: &futures_rustls::server::TlsStream<IO>) -> String {
    let (_, conn) = tls.get_ref();
    conn.peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(subject_name)
        .map_or_else(|| ANONYMOUS.to_owned(), |s| user_principal(&s))
}

/// The SASL side of a connection on a SASL listener.
pub struct Sasl {
    session: SaslSession,
    peer: Rc<str>,
}

impl Sasl {
    pub fn new(ctx: &ShardCtx, peer: &str, listener: usize) -> Sasl {
        let s = &ctx.config().security;
        Sasl {
            // Config validation gives every listener its list; none would refuse every login.
            session: SaslSession::new(
                s.sasl_mechanisms.get(listener).cloned().unwrap_or_default(),
                s.reauth,
            ),
            peer: peer.into(),
        }
    }

    /// Whether request `api` may be served now; the connection closes if not.
    pub fn gate(&self, api: ApiKey) -> Result<(), ConnectionError> {
        match self.session.gate(api as i16, Instant::now()) {
            Gate::Serve => Ok(()),
            Gate::NotAuthenticated => Err(ConnectionError::NotAuthenticated { api }),
            Gate::Expired => Err(ConnectionError::SessionExpired {
                user: self.session.user().unwrap_or_default().to_owned(),
            }),
        }
    }
}

/// SaslHandshake: names the mechanism the SaslAuthenticate requests that follow run.
pub fn handshake(
    sasl: Option<&mut Sasl>,
    req: SaslHandshakeRequest,
    version: i16,
) -> SaslHandshakeResponse {
    let mut resp = SaslHandshakeResponse::default();
    match sasl {
        None => resp.error_code = ResponseError::IllegalSaslState.code(),
        Some(_) if version == 0 => {
            tracing::info!("SaslHandshake v0 (raw SASL tokens) refused: the client must use v1 with SaslAuthenticate");
            resp.error_code = ResponseError::IllegalSaslState.code();
        }
        Some(s) => {
            resp.mechanisms = s
                .session
                .enabled()
                .iter()
                .map(|m| StrBytes::from_static_str(m.name()))
                .collect();
            if s.session.handshake(req.mechanism.as_str()).is_err() {
                resp.error_code = ResponseError::UnsupportedSaslMechanism.code();
            }
        }
    }
    resp
}

/// SaslAuthenticate: one message of the exchange. Returns the answer and whether it failed
/// (the connection then closes once the answer is written). On success the connection acts
/// as the user from its next request.
pub async fn authenticate(
    ctx: &ShardCtx,
    sasl: Option<&mut Sasl>,
    client: &mut Client,
    req: SaslAuthenticateRequest,
) -> (SaslAuthenticateResponse, bool) {
    let mut resp = SaslAuthenticateResponse::default();
    let Some(s) = sasl else {
        resp.error_code = ResponseError::IllegalSaslState.code();
        resp.error_message = Some(StrBytes::from_static_str(
            "SaslAuthenticate on a listener that is not SASL",
        ));
        return (resp, true);
    };
    let snapshot = ctx.snapshot().clone();
    let outcome = s.session.authenticate(
        &req.auth_bytes,
        |user| snapshot.scram.get(user).cloned(),
        Instant::now(),
    );
    match outcome {
        Ok(Authenticated::Continue(bytes)) => {
            resp.auth_bytes = Bytes::from(bytes);
            (resp, false)
        }
        Ok(Authenticated::Done { reply, lifetime }) => {
            resp.auth_bytes = Bytes::from(reply);
            resp.session_lifetime_ms = lifetime.map_or(0, |d| d.as_millis() as i64);
            let user = s.session.user().unwrap_or_default();
            client.principal = user_principal(user);
            tracing::debug!(peer = %s.peer, %user, "authenticated");
            (resp, false)
        }
        Err(failure) => {
            let mechanism = s.session.mechanism().map_or("-", |m| m.name());
            ctx.auth_failures().sasl_failed(
                &s.peer,
                mechanism,
                failure.user.as_deref(),
                &failure.reason,
            );
            resp.error_code = ResponseError::SaslAuthenticationFailed.code();
            resp.error_message = Some(StrBytes::from_string(match s.session.mechanism() {
                Some(m) => failure.client_message(m),
                None => failure.reason,
            }));
            glommio::timer::sleep(ctx.config().security.failed_authentication_delay).await;
            (resp, true)
        }
    }
}
