//! SCRAM (RFC 5802/7677) as MongoDB uses it: SCRAM-SHA-1 and SCRAM-SHA-256 credentials,
//! the server's side of the conversation (`saslStart`/`saslContinue`) and the client's
//! side, which replica set members use to authenticate to each other with the key file.
//!
//! Credentials are stored as MongoDB stores them in `admin.system.users`: the salt, the
//! iteration count, `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")`, base64. The password is never kept;
//! the expensive derivation (PBKDF2) runs once, when a password is set, so an
//! authentication costs the server a few HMACs and a reconnect storm costs it little.
//! SCRAM-SHA-1 derives from MongoDB's digest of the password (`MD5("user:mongo:pwd")`,
//! hex), SCRAM-SHA-256 from the SASLprep'd password itself, as drivers do.

use basalt_error::{Error, ErrorCode, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bson::{doc, Document};
use hmac::{KeyInit, Mac};
use subtle::ConstantTimeEq;

/// MongoDB's reply to any failed authentication: it never says which part was wrong.
pub const AUTHENTICATION_FAILED: &str = "Authentication failed.";
/// The iteration counts a client accepts from a server: RFC 5802's least, and a bound
/// so that a hostile server cannot make the client derive for minutes.
const MIN_ITERATIONS: u32 = 4096;
const MAX_ITERATIONS: u32 = 1_000_000;
/// Bytes of random nonce the server adds to the client's.
const SERVER_NONCE_BYTES: usize = 24;

/// A SCRAM mechanism, by its SASL name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha1, Mechanism::Sha256];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// MongoDB's default iteration counts (`scramIterationCount`,
    /// `scramSHA256IterationCount`).
    pub fn default_iterations(self) -> u32 {
        match self {
            Mechanism::Sha1 => 10_000,
            Mechanism::Sha256 => 15_000,
        }
    }

    /// MongoDB's salt length: the hash's length less four bytes.
    fn salt_len(self) -> usize {
        match self {
            Mechanism::Sha1 => 16,
            Mechanism::Sha256 => 28,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        use sha2::Digest;
        match self {
            Mechanism::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Mechanism::Sha1 => run::<hmac::Hmac<sha1::Sha1>>(key, data),
            Mechanism::Sha256 => run::<hmac::Hmac<sha2::Sha256>>(key, data),
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let mut out = [0u8; 20];
                pbkdf2::pbkdf2_hmac::<sha1::Sha1>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            Mechanism::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }

    /// The string this mechanism salts: MongoDB's MD5 digest of user and password for
    /// SCRAM-SHA-1, the SASLprep'd password for SCRAM-SHA-256.
    pub fn password_input(self, user: &str, password: &str) -> Result<String> {
        match self {
            Mechanism::Sha1 => {
                use md5::Digest;
                let digest = md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes());
                Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
            }
            Mechanism::Sha256 => stringprep::saslprep(password)
                .map(|p| p.into_owned())
                .map_err(|e| Error::bad_value(format!("Error preparing password: {e}"))),
        }
    }
}

/// One mechanism's stored credentials, as in a user document's `credentials`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl Credentials {
    /// Derives new credentials for a password, with a fresh random salt.
    pub fn derive(mechanism: Mechanism, user: &str, password: &str) -> Result<Credentials> {
        let mut salt = vec![0u8; mechanism.salt_len()];
        rand::fill(&mut salt[..]);
        let input = mechanism.password_input(user, password)?;
        Ok(Credentials::from_salted(
            mechanism,
            &mechanism.salted_password(input.as_bytes(), &salt, mechanism.default_iterations()),
            salt,
            mechanism.default_iterations(),
        ))
    }

    /// Whether `password` is `user`'s, checked as a SCRAM proof would check it (the key
    /// it derives hashes to the stored key; compared in constant time). For logins that
    /// send the password itself, over HTTP Basic authentication.
    pub fn matches_password(&self, mechanism: Mechanism, user: &str, password: &str) -> bool {
        let Ok(input) = mechanism.password_input(user, password) else {
            return false;
        };
        let salted = mechanism.salted_password(input.as_bytes(), &self.salt, self.iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        bool::from(mechanism.hash(&client_key).ct_eq(&self.stored_key))
    }

    fn from_salted(mechanism: Mechanism, salted: &[u8], salt: Vec<u8>, iterations: u32) -> Self {
        let client_key = mechanism.hmac(salted, b"Client Key");
        Credentials {
            iterations,
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, b"Server Key"),
        }
    }

    pub fn to_document(&self) -> Document {
        doc! {
            "iterationCount": self.iterations as i32,
            "salt": BASE64.encode(&self.salt),
            "storedKey": BASE64.encode(&self.stored_key),
            "serverKey": BASE64.encode(&self.server_key),
        }
    }

    pub fn from_document(document: &Document) -> Option<Credentials> {
        let bytes = |field: &str| BASE64.decode(document.get_str(field).ok()?).ok();
        Some(Credentials {
            iterations: u32::try_from(document.get_i32("iterationCount").ok()?).ok()?,
            salt: bytes("salt")?,
            stored_key: bytes("storedKey")?,
            server_key: bytes("serverKey")?,
        })
    }
}

fn failed() -> Error {
    Error::new(ErrorCode::AUTHENTICATION_FAILED, AUTHENTICATION_FAILED)
}

/// SCRAM's escaping of `=` and `,` in a user name.
fn decode_name(name: &str) -> Result<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(failed()),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn encode_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// The value of the attribute `key` (`r`, `s`, ...) in a SCRAM message.
fn attribute(message: &str, key: char) -> Option<&str> {
    message
        .split(',')
        .find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
}

/// The server's side of one conversation, between the client's first message and its
/// final one.
#[derive(Debug)]
pub struct ServerConversation {
    mechanism: Mechanism,
    user: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credentials: Credentials,
    /// Set once the client's proof checked; the conversation then only closes.
    proved: bool,
}

/// The client's first message, parsed: who it claims to be.
#[derive(Debug)]
pub struct ClientFirst {
    pub user: String,
    gs2_header: String,
    client_first_bare: String,
    client_nonce: String,
}

impl ClientFirst {
    /// Parses `n,,n=user,r=nonce` (gs2 header, then the bare message). Channel binding
    /// and mandatory extensions are refused, as MongoDB refuses them.
    pub fn parse(payload: &[u8]) -> Result<ClientFirst> {
        let text = std::str::from_utf8(payload).map_err(|_| failed())?;
        let mut parts = text.splitn(3, ',');
        let (Some(flag), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(Error::bad_value(
                "Incorrect number of arguments for first SCRAM client message",
            ));
        };
        if flag.starts_with('p') {
            return Err(Error::bad_value("Server does not support channel binding"));
        }
        if flag != "n" && flag != "y" {
            return Err(Error::bad_value(format!(
                "Incorrect SCRAM client message prefix: {flag}"
            )));
        }
        if bare.starts_with("m=") {
            return Err(Error::bad_value(
                "SCRAM mandatory extensions are not supported",
            ));
        }
        let user = bare
            .strip_prefix("n=")
            .and_then(|rest| rest.split(',').next())
            .ok_or_else(|| Error::bad_value("Invalid SCRAM user name"))?;
        let client_nonce = attribute(bare, 'r')
            .filter(|n| !n.is_empty())
            .ok_or_else(|| Error::bad_value("Invalid SCRAM client nonce"))?;
        let user = decode_name(user)?;
        if let Some(authzid) = authzid.strip_prefix("a=") {
            if decode_name(authzid)? != user {
                return Err(Error::bad_value(
                    "SCRAM user name and authorization identity differ",
                ));
            }
        }
        Ok(ClientFirst {
            user,
            gs2_header: format!("{flag},{authzid},"),
            client_first_bare: bare.to_string(),
            client_nonce: client_nonce.to_string(),
        })
    }
}

impl ServerConversation {
    /// Answers the client's first message for a user with these credentials: returns
    /// the conversation and the server's first message (nonce, salt, iterations).
    pub fn start(
        mechanism: Mechanism,
        first: ClientFirst,
        credentials: Credentials,
    ) -> (ServerConversation, Vec<u8>) {
        let mut random = [0u8; SERVER_NONCE_BYTES];
        rand::fill(&mut random[..]);
        let nonce = format!("{}{}", first.client_nonce, BASE64.encode(random));
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credentials.salt),
            credentials.iterations
        );
        let reply = server_first.clone().into_bytes();
        let conversation = ServerConversation {
            mechanism,
            user: first.user,
            gs2_header: first.gs2_header,
            client_first_bare: first.client_first_bare,
            server_first,
            nonce,
            credentials,
            proved: false,
        };
        (conversation, reply)
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn proved(&self) -> bool {
        self.proved
    }

    /// Checks the client's final message (`c=...,r=...,p=proof`) and returns the
    /// server's final one (`v=signature`). Any mismatch is AuthenticationFailed.
    pub fn finish(&mut self, payload: &[u8]) -> Result<Vec<u8>> {
        let text = std::str::from_utf8(payload).map_err(|_| failed())?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(failed)?;
        let binding = attribute(without_proof, 'c').ok_or_else(failed)?;
        let nonce = attribute(without_proof, 'r').ok_or_else(failed)?;
        let expected_binding = BASE64.encode(self.gs2_header.as_bytes());
        if binding != expected_binding || nonce != self.nonce {
            return Err(failed());
        }
        let proof = BASE64.decode(proof).map_err(|_| failed())?;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let m = self.mechanism;
        let signature = m.hmac(&self.credentials.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(failed());
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        if !bool::from(m.hash(&client_key).ct_eq(&self.credentials.stored_key)) {
            return Err(failed());
        }
        self.proved = true;
        let server_signature = m.hmac(&self.credentials.server_key, auth_message.as_bytes());
        Ok(format!("v={}", BASE64.encode(server_signature)).into_bytes())
    }
}

/// The client's side of a conversation, for a member authenticating to another.
#[derive(Debug)]
pub struct ClientConversation {
    mechanism: Mechanism,
    salted_input: String,
    client_first_bare: String,
    client_nonce: String,
    server_signature: Option<Vec<u8>>,
}

impl ClientConversation {
    /// Starts a conversation for `user` with `password`; returns it and the first message.
    pub fn start(
        mechanism: Mechanism,
        user: &str,
        password: &str,
    ) -> Result<(ClientConversation, Vec<u8>)> {
        let mut random = [0u8; SERVER_NONCE_BYTES];
        rand::fill(&mut random[..]);
        let client_nonce = BASE64.encode(random);
        let client_first_bare = format!("n={},r={client_nonce}", encode_name(user));
        let first = format!("n,,{client_first_bare}").into_bytes();
        let conversation = ClientConversation {
            mechanism,
            salted_input: mechanism.password_input(user, password)?,
            client_first_bare,
            client_nonce,
            server_signature: None,
        };
        Ok((conversation, first))
    }

    /// Answers the server's first message with the proof.
    pub fn respond(&mut self, server_first: &[u8]) -> Result<Vec<u8>> {
        let text = std::str::from_utf8(server_first).map_err(|_| failed())?;
        let nonce = attribute(text, 'r').ok_or_else(failed)?;
        let salt = attribute(text, 's')
            .and_then(|s| BASE64.decode(s).ok())
            .ok_or_else(failed)?;
        let iterations: u32 = attribute(text, 'i')
            .and_then(|i| i.parse().ok())
            .filter(|i| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(i))
            .ok_or_else(failed)?;
        if !nonce.starts_with(&self.client_nonce) {
            return Err(failed());
        }
        let m = self.mechanism;
        let salted = m.salted_password(self.salted_input.as_bytes(), &salt, iterations);
        let keys = Credentials::from_salted(m, &salted, salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_key = m.hmac(&salted, b"Client Key");
        let signature = m.hmac(&keys.stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        self.server_signature = Some(m.hmac(&keys.server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server's final message: the server knew the credentials too.
    pub fn verify(&self, server_final: &[u8]) -> Result<()> {
        let text = std::str::from_utf8(server_final).map_err(|_| failed())?;
        let signature = attribute(text, 'v')
            .and_then(|v| BASE64.decode(v).ok())
            .ok_or_else(failed)?;
        match &self.server_signature {
            Some(expected) if bool::from(expected.ct_eq(&signature)) => Ok(()),
            _ => Err(failed()),
        }
    }
}

/// What the fuzz target (`fuzz/fuzz_targets/scram.rs`) and its corpus test run on one
/// input: every parser of a SCRAM message takes it, as a client's first or final message
/// and as a server's first or final one, and none may panic or accept a forgery.
pub fn fuzz_one(data: &[u8]) {
    static STORED: std::sync::OnceLock<Credentials> = std::sync::OnceLock::new();
    let stored = STORED
        .get_or_init(|| Credentials::from_salted(Mechanism::Sha256, &[7; 32], vec![1; 28], 4096));
    let _ = ClientFirst::parse(data);
    let first = ClientFirst::parse(b"n,,n=u,r=nonce").expect("a valid first message");
    let (mut server, _) = ServerConversation::start(Mechanism::Sha256, first, stored.clone());
    assert!(
        server.finish(data).is_err(),
        "an arbitrary final message was accepted"
    );
    let (mut client, _) =
        ClientConversation::start(Mechanism::Sha256, "u", "p").expect("a client conversation");
    let _ = client.respond(data);
    let _ = client.verify(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_matches_the_credentials_derived_from_it() {
        for m in Mechanism::ALL {
            let credentials = Credentials::derive(m, "ann", "pencil").unwrap();
            assert!(credentials.matches_password(m, "ann", "pencil"));
            assert!(!credentials.matches_password(m, "ann", "pencil2"));
        }
        // SCRAM-SHA-1 salts a digest of user and password: another user's name fails.
        let sha1 = Credentials::derive(Mechanism::Sha1, "ann", "pencil").unwrap();
        assert!(!sha1.matches_password(Mechanism::Sha1, "bob", "pencil"));
    }

    /// RFC 7677's example, whose salt and nonces are fixed: the server side must produce
    /// its server-first and verify its proof.
    #[test]
    fn rfc_7677_sha256_example() {
        let m = Mechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let credentials = Credentials::from_salted(m, &salted, salt, 4096);
        let first = ClientFirst::parse(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
        let (mut conversation, _) = ServerConversation::start(m, first, credentials);
        // The RFC's server nonce, in place of the random one.
        conversation.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into();
        conversation.server_first =
            format!("r={},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", conversation.nonce);
        let reply = conversation
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(reply, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }

    /// MongoDB's SCRAM-SHA-1 digests the password with the user name first.
    #[test]
    fn sha1_salts_mongodbs_password_digest() {
        assert_eq!(
            Mechanism::Sha1.password_input("user", "pencil").unwrap(),
            "1c33006ec1ffd90f9cadcbcc0e118200"
        );
    }

    #[test]
    fn client_and_server_agree_and_a_wrong_password_fails() {
        for m in Mechanism::ALL {
            let stored = Credentials::derive(m, "ann", "s3cret").unwrap();
            for (password, accepted) in [("s3cret", true), ("wrong", false)] {
                let (mut client, first) = ClientConversation::start(m, "ann", password).unwrap();
                let first = ClientFirst::parse(&first).unwrap();
                assert_eq!(first.user, "ann");
                let (mut server, server_first) =
                    ServerConversation::start(m, first, stored.clone());
                let client_final = client.respond(&server_first).unwrap();
                match server.finish(&client_final) {
                    Ok(server_final) => {
                        assert!(accepted);
                        client.verify(&server_final).unwrap();
                    }
                    Err(e) => {
                        assert!(!accepted);
                        assert_eq!(e.code, ErrorCode::AUTHENTICATION_FAILED);
                        assert_eq!(e.message, AUTHENTICATION_FAILED);
                    }
                }
            }
        }
    }

    #[test]
    fn credentials_round_trip_through_their_document() {
        let c = Credentials::derive(Mechanism::Sha256, "u", "p").unwrap();
        assert_eq!(c.salt.len(), 28);
        assert_eq!(Credentials::from_document(&c.to_document()), Some(c));
    }

    #[test]
    fn names_with_commas_and_equals_are_escaped() {
        assert_eq!(decode_name(&encode_name("a,b=c")).unwrap(), "a,b=c");
        assert!(decode_name("bad=2X").is_err());
    }

    proptest::proptest! {
        /// Whatever the client sends, parsing answers with an error or a user, never a
        /// panic.
        #[test]
        fn any_client_message_parses_or_fails_cleanly(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let _ = ClientFirst::parse(&bytes);
            let stored = Credentials::derive(Mechanism::Sha1, "u", "p").unwrap();
            let first = ClientFirst::parse(b"n,,n=u,r=abc").unwrap();
            let (mut server, _) = ServerConversation::start(Mechanism::Sha1, first, stored);
            proptest::prop_assert!(server.finish(&bytes).is_err());
        }
    }
}
