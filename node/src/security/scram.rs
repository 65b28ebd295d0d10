//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: the salted
//! credentials the cluster metadata stores (never a password), and the server's side of one
//! authentication exchange. Pure: no I/O, the credential lookup is a closure. The mechanisms'
//! primitives and the client's side are `kafka_client::scram`.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};

use kafka_client::scram::constant_time_eq;
pub use kafka_client::scram::{ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

/// A user's stored SCRAM credential: salt, StoredKey and ServerKey (base64), iterations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: String,
    pub stored_key: String,
    pub server_key: String,
    pub iterations: i32,
}

impl ScramCredential {
    /// The credential from a salted password (AlterUserScramCredentials sends that, never
    /// the password).
    pub fn from_salted_password(
        mech: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let (client_key, server_key) = mech.keys(salted_password);
        ScramCredential {
            salt: B64.encode(salt),
            stored_key: B64.encode(mech.hash(&client_key)),
            server_key: B64.encode(server_key),
            iterations,
        }
    }

    /// The credential for `password` with a fresh random salt.
    pub fn from_password(mech: ScramMechanism, password: &str, iterations: i32) -> ScramCredential {
        let salt: [u8; 32] = rand::random();
        let salted = mech.salted_password(password.as_bytes(), &salt, iterations as u32);
        ScramCredential::from_salted_password(mech, &salt, &salted, iterations)
    }

    /// Whether `password` is the one this credential was made from (SASL/PLAIN checks
    /// passwords against the stored SCRAM credentials).
    pub fn matches_password(&self, mech: ScramMechanism, password: &str) -> bool {
        let (Ok(salt), Ok(stored)) = (B64.decode(&self.salt), B64.decode(&self.stored_key)) else {
            return false;
        };
        let salted = mech.salted_password(password.as_bytes(), &salt, self.iterations as u32);
        let client_key = mech.hmac(&salted, b"Client Key");
        constant_time_eq(&mech.hash(&client_key), &stored)
    }
}

/// Why an exchange failed; the message is for the broker's log, the client is told only
/// that authentication failed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("unknown user")]
    UnknownUser,
    #[error("wrong password (client proof does not match)")]
    BadProof,
    #[error("{0} is not supported")]
    Unsupported(&'static str),
}

/// One step of the exchange.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    /// Send this and wait for the client's next message.
    Continue(Vec<u8>),
    /// Authenticated as `user`; send this last message.
    Done { user: String, reply: Vec<u8> },
}

/// The server's side of one SCRAM exchange.
pub struct ScramServer {
    mech: ScramMechanism,
    state: State,
}

enum State {
    First,
    Final {
        user: String,
        credential: ScramCredential,
        nonce: String,
        /// client-first-message-bare "," server-first-message
        auth_prefix: String,
    },
    Over,
}

/// RFC 5802's saslname: "=2C" is ',' and "=3D" is '='; any other '=' is malformed.
fn unescape_name(s: &str) -> Result<String, ScramError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("bad escape in user name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of attribute `key` ("k=value") in `part`.
fn attr(part: Option<&str>, key: char) -> Result<&str, ScramError> {
    part.and_then(|p| p.strip_prefix(key))
        .and_then(|p| p.strip_prefix('='))
        .ok_or(ScramError::Malformed("attribute missing or out of order"))
}

impl ScramServer {
    pub fn new(mech: ScramMechanism) -> ScramServer {
        ScramServer {
            mech,
            state: State::First,
        }
    }

    /// Takes the client's next message. `lookup` finds a user's credential for this
    /// mechanism.
    pub fn step(
        &mut self,
        input: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<ScramStep, ScramError> {
        let input = std::str::from_utf8(input).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        match std::mem::replace(&mut self.state, State::Over) {
            State::First => self.client_first(input, lookup),
            State::Final {
                user,
                credential,
                nonce,
                auth_prefix,
            } => self.client_final(input, user, &credential, &nonce, &auth_prefix),
            State::Over => Err(ScramError::Malformed("the exchange is over")),
        }
    }

    fn client_first(
        &mut self,
        input: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<ScramStep, ScramError> {
        // gs2-header: "n," or "y," (no channel binding), then an optional "a=authzid", ",".
        let (cb, rest) = input
            .split_once(',')
            .ok_or(ScramError::Malformed("no GS2 header"))?;
        match cb {
            "n" | "y" => {}
            c if c.starts_with("p=") => return Err(ScramError::Unsupported("channel binding")),
            _ => return Err(ScramError::Malformed("bad GS2 channel binding flag")),
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or(ScramError::Malformed("no GS2 header"))?;
        let mut parts = bare.split(',');
        let user = unescape_name(attr(parts.next(), 'n')?)?;
        let client_nonce = attr(parts.next(), 'r')?;
        if client_nonce.is_empty() {
            return Err(ScramError::Malformed("empty nonce"));
        }
        for ext in parts {
            if ext.starts_with("tokenauth=") {
                return Err(ScramError::Unsupported("delegation token authentication"));
            }
        }
        if !authzid.is_empty() {
            let id = unescape_name(attr(Some(authzid), 'a')?)?;
            if id != user {
                return Err(ScramError::Unsupported(
                    "an authorization id other than the user",
                ));
            }
        }
        let credential = lookup(&user).ok_or(ScramError::UnknownUser)?;
        let server_nonce: [u8; 24] = rand::random();
        let nonce = format!("{client_nonce}{}", B64.encode(server_nonce));
        let server_first = format!(
            "r={nonce},s={},i={}",
            credential.salt, credential.iterations
        );
        self.state = State::Final {
            user,
            credential,
            nonce,
            auth_prefix: format!("{bare},{server_first}"),
        };
        Ok(ScramStep::Continue(server_first.into_bytes()))
    }

    fn client_final(
        &mut self,
        input: &str,
        user: String,
        credential: &ScramCredential,
        nonce: &str,
        auth_prefix: &str,
    ) -> Result<ScramStep, ScramError> {
        let (without_proof, proof) = input
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof"))?;
        let mut parts = without_proof.split(',');
        let binding = attr(parts.next(), 'c')?;
        // "n,," or "y,," base64: no channel binding data.
        if binding != "biws" && binding != "eSws" {
            return Err(ScramError::Malformed("channel binding does not match"));
        }
        if attr(parts.next(), 'r')? != nonce {
            return Err(ScramError::Malformed("nonce does not match"));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        let stored_key = B64
            .decode(&credential.stored_key)
            .map_err(|_| ScramError::Malformed("stored key"))?;
        let server_key = B64
            .decode(&credential.server_key)
            .map_err(|_| ScramError::Malformed("server key"))?;
        let auth_message = format!("{auth_prefix},{without_proof}");
        let signature = self.mech.hmac(&stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(ScramError::BadProof);
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !constant_time_eq(&self.mech.hash(&client_key), &stored_key) {
            return Err(ScramError::BadProof);
        }
        let server_signature = self.mech.hmac(&server_key, auth_message.as_bytes());
        Ok(ScramStep::Done {
            user,
            reply: format!("v={}", B64.encode(server_signature)).into_bytes(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The real client's side, with a fixed nonce.
    pub struct Client(kafka_client::scram::ScramClient);

    impl Client {
        pub fn new(mech: ScramMechanism, user: &str, password: &str) -> Client {
            Client(kafka_client::scram::ScramClient::with_nonce(
                mech,
                user,
                password,
                "fyko+d2lbbFgONRv9qkxdawL",
            ))
        }

        pub fn first(&mut self) -> Vec<u8> {
            self.0.first()
        }

        /// The final message; [`Client::verify`] checks the server's answer.
        pub fn last(&mut self, server_first: &[u8]) -> Vec<u8> {
            self.0
                .last(server_first)
                .expect("a well-formed server-first")
        }

        pub fn verify(&mut self, server_final: &[u8]) -> bool {
            self.0.verify(server_final).is_ok()
        }
    }

    fn exchange(
        mech: ScramMechanism,
        stored: &ScramCredential,
        user: &str,
        password: &str,
    ) -> Result<ScramStep, ScramError> {
        let mut client = Client::new(mech, user, password);
        let mut server = ScramServer::new(mech);
        let first = server.step(&client.first(), |u| (u == "alice").then(|| stored.clone()))?;
        let ScramStep::Continue(server_first) = first else {
            panic!("server finished after the first message");
        };
        let last = client.last(&server_first);
        let done = server.step(&last, |_| None)?;
        if let ScramStep::Done { reply, .. } = &done {
            assert!(
                client.verify(reply),
                "the client checks the server's signature"
            );
        }
        Ok(done)
    }

    #[test]
    fn right_password_authenticates_wrong_one_does_not() {
        for mech in ScramMechanism::ALL {
            let stored = ScramCredential::from_password(mech, "alice-secret", 4096);
            assert!(matches!(
                exchange(mech, &stored, "alice", "alice-secret"),
                Ok(ScramStep::Done { user, .. }) if user == "alice"
            ));
            assert_eq!(
                exchange(mech, &stored, "alice", "wrong"),
                Err(ScramError::BadProof)
            );
            assert_eq!(
                exchange(mech, &stored, "bob", "alice-secret"),
                Err(ScramError::UnknownUser)
            );
            assert!(stored.matches_password(mech, "alice-secret"));
            assert!(!stored.matches_password(mech, "alice-secreT"));
        }
    }

    /// RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil", 4096 iterations.
    #[test]
    fn rfc7677_test_vector() {
        let mech = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = mech.salted_password(b"pencil", &salt, 4096);
        let cred = ScramCredential::from_salted_password(mech, &salt, &salted, 4096);
        let mut server = ScramServer::new(mech);
        let ScramStep::Continue(sf) = server
            .step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", |_| Some(cred.clone()))
            .unwrap()
        else {
            panic!()
        };
        let sf = String::from_utf8(sf).unwrap();
        // Replay the RFC's exchange with our server nonce: the proof is recomputed, but the
        // salted password and keys must be the RFC's.
        assert!(sf.starts_with("r=rOprNGfwEbeRWgbNEkqO"));
        assert!(sf.ends_with(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
        let client_key = mech.hmac(&salted, b"Client Key");
        assert_eq!(B64.encode(mech.hash(&client_key)), cred.stored_key);
        // RFC 7677: ServerSignature for its nonce, computed from the same ServerKey.
        let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let server_key = B64.decode(&cred.server_key).unwrap();
        assert_eq!(
            B64.encode(mech.hmac(&server_key, auth.as_bytes())),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn malformed_messages_are_refused() {
        let mech = ScramMechanism::Sha512;
        let cred = ScramCredential::from_password(mech, "x", 4096);
        for bad in [
            &b""[..],
            b"n,,",
            b"x,,n=a,r=b",
            b"p=tls-unique,,n=a,r=b",
            b"n,,r=b,n=a",
            b"n,a=bob,n=alice,r=b",
            b"n,,n=a=b,r=c",
            b"n,,n=alice,r=abc,tokenauth=true",
            &[0xff, 0xfe],
        ] {
            let mut s = ScramServer::new(mech);
            assert!(s.step(bad, |_| Some(cred.clone())).is_err(), "{bad:?}");
        }
        assert_eq!(unescape_name("a=2Cb=3Dc").unwrap(), "a,b=c");
    }
}
