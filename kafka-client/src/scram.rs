//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: the mechanisms'
//! primitives (shared with the broker's server side, which keeps its credentials and exchange
//! in `node`) and the client's side of one exchange. Pure: no I/O.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's SCRAM mechanisms (AlterUserScramCredentials' `mechanism`: 1 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

/// Kafka's bounds on a SCRAM credential's iterations.
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn parse(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's `ScramMechanism` type.
    pub fn id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_id(id: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.id() == id)
    }

    /// RFC 5802's H().
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's HMAC().
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    /// RFC 5802's Hi(): PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }

    /// ClientKey and ServerKey from a salted password.
    pub fn keys(self, salted_password: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (
            self.hmac(salted_password, b"Client Key"),
            self.hmac(salted_password, b"Server Key"),
        )
    }
}

/// Compares without stopping at the first difference.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// RFC 5802's saslname: ',' is "=2C" and '=' is "=3D".
pub fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// Why the client's side of an exchange failed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScramClientError {
    #[error("malformed SCRAM message from the broker: {0}")]
    Malformed(&'static str),
    #[error("the broker's nonce does not extend ours")]
    Nonce,
    #[error("the broker asks for {0} iterations, fewer than SCRAM's minimum of 4096")]
    TooFewIterations(u32),
    #[error("the broker refused: {0}")]
    Refused(String),
    #[error("the broker's signature does not match: it does not hold this user's credential")]
    ServerSignature,
    #[error("the exchange is over")]
    Over,
}

/// The client's side of one SCRAM exchange: [`ScramClient::first`], then
/// [`ScramClient::last`] with the server's first message, then [`ScramClient::verify`] with its
/// final one.
pub struct ScramClient {
    mech: ScramMechanism,
    user: String,
    password: String,
    nonce: String,
    first_bare: String,
    server_signature: Option<Vec<u8>>,
}

fn attr<'a>(part: Option<&'a str>, key: &str) -> Result<&'a str, ScramClientError> {
    part.and_then(|p| p.strip_prefix(key))
        .and_then(|p| p.strip_prefix('='))
        .ok_or(ScramClientError::Malformed(
            "attribute missing or out of order",
        ))
}

impl ScramClient {
    pub fn new(mech: ScramMechanism, user: &str, password: &str) -> ScramClient {
        let nonce: [u8; 24] = rand::random();
        ScramClient::with_nonce(mech, user, password, &B64.encode(nonce))
    }

    /// With a given client nonce (tests replay published exchanges).
    pub fn with_nonce(
        mech: ScramMechanism,
        user: &str,
        password: &str,
        nonce: &str,
    ) -> ScramClient {
        ScramClient {
            mech,
            user: user.to_owned(),
            password: password.to_owned(),
            nonce: nonce.to_owned(),
            first_bare: String::new(),
            server_signature: None,
        }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mech
    }

    /// client-first-message: no channel binding, no authorization id.
    pub fn first(&mut self) -> Vec<u8> {
        self.first_bare = format!("n={},r={}", escape_name(&self.user), self.nonce);
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// client-final-message for the server's first message.
    pub fn last(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramClientError> {
        let sf = std::str::from_utf8(server_first)
            .map_err(|_| ScramClientError::Malformed("not UTF-8"))?;
        if let Some(e) = sf.strip_prefix("e=") {
            return Err(ScramClientError::Refused(e.to_owned()));
        }
        let mut parts = sf.split(',');
        let nonce = attr(parts.next(), "r")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramClientError::Nonce);
        }
        let salt = B64
            .decode(attr(parts.next(), "s")?)
            .map_err(|_| ScramClientError::Malformed("salt is not base64"))?;
        let iterations: u32 = attr(parts.next(), "i")?
            .parse()
            .map_err(|_| ScramClientError::Malformed("iterations are not a number"))?;
        if iterations < MIN_ITERATIONS as u32 {
            return Err(ScramClientError::TooFewIterations(iterations));
        }
        let salted = self
            .mech
            .salted_password(self.password.as_bytes(), &salt, iterations);
        let (client_key, server_key) = self.mech.keys(&salted);
        let stored_key = self.mech.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{sf},{without_proof}", self.first_bare);
        let signature = self.mech.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        self.server_signature = Some(self.mech.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server's final message: its signature proves it holds our credential.
    pub fn verify(&mut self, server_final: &[u8]) -> Result<(), ScramClientError> {
        let expected = self.server_signature.take().ok_or(ScramClientError::Over)?;
        let sf = std::str::from_utf8(server_final)
            .map_err(|_| ScramClientError::Malformed("not UTF-8"))?;
        if let Some(e) = sf.strip_prefix("e=") {
            return Err(ScramClientError::Refused(e.to_owned()));
        }
        let v = B64
            .decode(attr(Some(sf.split(',').next().unwrap_or("")), "v")?)
            .map_err(|_| ScramClientError::Malformed("signature is not base64"))?;
        if constant_time_eq(&v, &expected) {
            Ok(())
        } else {
            Err(ScramClientError::ServerSignature)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 exchange, replayed with its client nonce.
    #[test]
    fn rfc7677_exchange() {
        let mut c = ScramClient::with_nonce(
            ScramMechanism::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(c.first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = c
            .last(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            c.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Ok(())
        );
    }

    #[test]
    fn a_forged_server_or_a_bad_first_message_is_refused() {
        let mut c = ScramClient::with_nonce(ScramMechanism::Sha512, "u", "p", "abc");
        c.first();
        assert_eq!(
            c.last(b"r=xyz123,s=AAAA,i=4096"),
            Err(ScramClientError::Nonce)
        );
        assert_eq!(c.last(b"r=abc,s=AAAA,i=4096"), Err(ScramClientError::Nonce));
        assert_eq!(
            c.last(b"r=abcdef,s=AAAA,i=100"),
            Err(ScramClientError::TooFewIterations(100))
        );
        assert!(matches!(
            c.last(b"e=unknown-user"),
            Err(ScramClientError::Refused(e)) if e == "unknown-user"
        ));
        c.last(b"r=abcdef,s=AAAA,i=4096").unwrap();
        assert_eq!(
            c.verify(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
            Err(ScramClientError::ServerSignature)
        );
        assert_eq!(c.verify(b"v=AAAA"), Err(ScramClientError::Over));
        assert_eq!(escape_name("a,b=c"), "a=2Cb=3Dc");
    }
}
