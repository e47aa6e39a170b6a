//! Connecting to PostgreSQL (a `postgres://` URL or the libpq environment, TLS as `sslmode`
//! asks) and quoting what goes into SQL.

use lakemirror_runtime::settings::Variable;
use std::sync::Arc;

use tokio_postgres::Client;
use tokio_postgres::config::SslMode as WireSslMode;

use crate::error::{Error, Result, Setting};

/// libpq's `sslmode`, all of it: tokio-postgres alone knows disable/prefer/require.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    /// Encrypted, server not verified (libpq's meaning).
    Require,
    /// Encrypted, the certificate chain and the host name verified (verify-ca is treated
    /// the same: stricter, never weaker).
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self> {
        Ok(match value {
            "disable" => Self::Disable,
            "allow" | "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" | "verify-full" => Self::VerifyFull,
            other => {
                return Err(Error::Connection(format!(
                    "sslmode={other}: allowed values are disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }
}

/// Where and how to connect. The password is inside `config` and never printed: `Debug` of
/// tokio-postgres's Config redacts it.
pub struct Connection {
    config: tokio_postgres::Config,
    /// As given (URL or `PGSSLMODE`); None: libpq's default, prefer.
    ssl: Option<SslMode>,
    root_cert: Option<RootCert>,
}

/// The CA that signs the server's certificate.
enum RootCert {
    /// `sslrootcert`: a PEM file.
    File(String),
    /// PEM text (from the function's environment or a secret).
    Pem(String),
}

impl std::fmt::Display for Connection {
    /// host:port/database as user, for messages (never the password).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = self
            .config
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .unwrap_or_else(|| "localhost".into());
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        write!(
            f,
            "{host}:{port}/{} as {}",
            self.config.get_dbname().unwrap_or("postgres"),
            self.config.get_user().unwrap_or("?")
        )
    }
}

/// `PGHOST`.
pub const PGHOST: Variable = Variable {
    name: "PGHOST",
    default: None,
    values: &[],
    help: "libpq's PGHOST, for a connection without POSTGRES_URL: the server's host; unset: localhost.",
};

/// `PGPORT`.
pub const PGPORT: Variable = Variable {
    name: "PGPORT",
    default: None,
    values: &[],
    help: "libpq's PGPORT, for a connection without POSTGRES_URL: the server's port.",
};

/// `PGUSER`.
pub const PGUSER: Variable = Variable {
    name: "PGUSER",
    default: None,
    values: &[],
    help: "libpq's PGUSER, for a connection without POSTGRES_URL: the user; unset: USER, else postgres.",
};

/// `USER`.
pub const USER: Variable = Variable {
    name: "USER",
    default: None,
    values: &[],
    help: "libpq's USER, for a connection without POSTGRES_URL: the user when PGUSER is unset.",
};

/// `PGPASSWORD`.
pub const PGPASSWORD: Variable = Variable {
    name: "PGPASSWORD",
    default: None,
    values: &[],
    help: "libpq's PGPASSWORD, for a connection without POSTGRES_URL: the password.",
};

/// `PGDATABASE`.
pub const PGDATABASE: Variable = Variable {
    name: "PGDATABASE",
    default: None,
    values: &[],
    help: "libpq's PGDATABASE, for a connection without POSTGRES_URL: the database.",
};

/// `PGSSLMODE`.
pub const PGSSLMODE: Variable = Variable {
    name: "PGSSLMODE",
    default: None,
    values: &[],
    help: "libpq's PGSSLMODE, for a connection without POSTGRES_URL: the sslmode.",
};

/// `PGSSLROOTCERT`.
pub const PGSSLROOTCERT: Variable = Variable {
    name: "PGSSLROOTCERT",
    default: None,
    values: &[],
    help: "libpq's PGSSLROOTCERT, for a connection without POSTGRES_URL: the CA file of the server's certificate.",
};

/// The libpq environment variables a connection without a URL reads.
pub const LIBPQ_VARIABLES: [&Variable; 8] = [
    &PGHOST,
    &PGPORT,
    &PGUSER,
    &USER,
    &PGPASSWORD,
    &PGDATABASE,
    &PGSSLMODE,
    &PGSSLROOTCERT,
];

impl Connection {
    /// From a `postgres://` URL, or when None from `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`,
    /// `PGDATABASE`, `PGSSLMODE`, `PGSSLROOTCERT`, as `libpq` looks them up. `password` (e.g. from Secrets Manager or a
    /// Lakebase OAuth token) replaces the one in the URL or environment.
    pub fn new(
        url: Option<&str>,
        password: Option<String>,
        libpq: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let env = |name: &str| libpq(name).filter(|v| !v.is_empty());
        let mut ssl = env(PGSSLMODE.name)
            .map(|m| SslMode::parse(&m))
            .transpose()?;
        let mut root_cert = env(PGSSLROOTCERT.name).map(RootCert::File);
        let mut config = match url {
            Some(url) => {
                let mut parsed = url::Url::parse(url).map_err(|e| {
                    Error::Connection(format!(
                        "the PostgreSQL URL is not a URL ({e}); expected postgres://user@host:5432/database?sslmode=require"
                    ))
                    .fixed_by(Setting::PostgresUrl)
                })?;
                if !matches!(parsed.scheme(), "postgres" | "postgresql") {
                    return Err(Error::Connection(
                        "the PostgreSQL URL must start with postgres:// or postgresql://".into(),
                    )
                    .fixed_by(Setting::PostgresUrl));
                }
                // sslmode and sslrootcert are ours to interpret; the rest goes to tokio-postgres.
                let mut kept = Vec::new();
                for (key, value) in parsed.query_pairs() {
                    match key.as_ref() {
                        "sslmode" => ssl = Some(SslMode::parse(&value)?),
                        "sslrootcert" => root_cert = Some(RootCert::File(value.into_owned())),
                        _ => kept.push((key.into_owned(), value.into_owned())),
                    }
                }
                parsed.set_query(None);
                if !kept.is_empty() {
                    parsed.query_pairs_mut().extend_pairs(kept);
                }
                parsed
                    .as_str()
                    .parse::<tokio_postgres::Config>()
                    .map_err(|e| {
                        Error::Connection(format!("the PostgreSQL URL: {e}"))
                            .fixed_by(Setting::PostgresUrl)
                    })?
            }
            None => {
                let mut config = tokio_postgres::Config::new();
                config.host(env(PGHOST.name).as_deref().unwrap_or("localhost"));
                if let Some(port) = env(PGPORT.name) {
                    config.port(port.parse().map_err(|_| {
                        Error::Connection(format!("PGPORT={port} is not a port number"))
                    })?);
                }
                let user = env(PGUSER.name)
                    .or_else(|| env(USER.name))
                    .unwrap_or_else(|| "postgres".into());
                config.user(&user);
                if let Some(pw) = env(PGPASSWORD.name) {
                    config.password(pw);
                }
                config.dbname(env(PGDATABASE.name).as_deref().unwrap_or(&user));
                config
            }
        };
        if let Some(password) = password {
            config.password(password);
        }
        config.application_name("lakemirror");
        Ok(Self {
            config,
            ssl,
            root_cert,
        })
    }

    /// As the function and the CLI connect: `verify-full` unless the URL says otherwise, the
    /// CA from `ca_pem` when given, and never a mode that sends the password to a server it
    /// has not verified (`disable`, `allow`, `prefer` may fall back to plaintext; `require`
    /// encrypts to whoever answers) unless `allow_insecure`.
    pub fn verified(mut self, ca_pem: Option<String>, allow_insecure: bool) -> Result<Self> {
        let ssl = *self.ssl.get_or_insert(SslMode::VerifyFull);
        if ssl != SslMode::VerifyFull && !allow_insecure {
            return Err(Error::Connection(format!(
                "the PostgreSQL URL asks for sslmode {ssl:?}, which sends the password and the rows to a server lakemirror has not verified (in plaintext, or encrypted to whoever answers); use sslmode=verify-full (the default, with sslrootcert or POSTGRES_CA_PEM for a private CA), or allow it with POSTGRES_ALLOW_INSECURE=true (SAM PostgresAllowInsecure)"
            )));
        }
        if let Some(pem) = ca_pem {
            self.root_cert = Some(RootCert::Pem(pem));
        }
        Ok(self)
    }

    fn ssl(&self) -> SslMode {
        self.ssl.unwrap_or(SslMode::Prefer)
    }

    /// Opens a session; the connection task runs until the client is dropped.
    pub async fn connect(&self) -> Result<Client> {
        let failed = |e: tokio_postgres::Error| {
            // tokio-postgres says only "error performing TLS handshake"; the why is below.
            let mut message = format!(
                "cannot connect to {self}: {}",
                lakemirror_storage::with_causes(&e)
            );
            let certificate = message.contains("certificate");
            if certificate {
                message.push_str(
                    " (sslmode=verify-full checks the server's certificate against sslrootcert, else the system's roots, and the host name: give sslrootcert=<CA file> and connect by a name the certificate holds)",
                );
            }
            Error::Postgres {
                message,
                retryable: !certificate,
            }
        };
        let mut config = self.config.clone();
        if self.ssl() == SslMode::Disable {
            config.ssl_mode(WireSslMode::Disable);
            let (client, connection) = config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(failed)?;
            spawn(connection);
            return Ok(client);
        }
        config.ssl_mode(match self.ssl() {
            SslMode::Prefer => WireSslMode::Prefer,
            _ => WireSslMode::Require,
        });
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new(self.tls_config()?);
        let (client, connection) = config.connect(tls).await.map_err(failed)?;
        spawn(connection);
        Ok(client)
    }

    fn tls_config(&self) -> Result<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Connection(format!("TLS: {e}")))?;
        // With a root certificate given, libpq's require verifies the chain too (verify-ca);
        // here that is verify-full, stricter.
        if self.ssl() != SslMode::VerifyFull && self.root_cert.is_none() {
            return Ok(builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyServer(provider)))
                .with_no_client_auth());
        }
        let mut roots = rustls::RootCertStore::empty();
        match &self.root_cert {
            Some(root) => {
                let (pem, origin) = match root {
                    RootCert::File(path) => (
                        std::fs::read(path).map_err(|e| {
                            Error::Connection(format!("sslrootcert {path} cannot be read: {e}"))
                        })?,
                        format!("sslrootcert {path}"),
                    ),
                    RootCert::Pem(text) => (
                        text.as_bytes().to_vec(),
                        "the CA (POSTGRES_CA_PEM)".to_string(),
                    ),
                };
                use rustls_pki_types::pem::PemObject;
                for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
                    let cert =
                        cert.map_err(|e| Error::Connection(format!("{origin} is not PEM: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| Error::Connection(format!("{origin}: {e}")))?;
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        Ok(builder.with_root_certificates(roots).with_no_client_auth())
    }
}

fn spawn(
    connection: impl std::future::Future<Output = std::result::Result<(), tokio_postgres::Error>>
    + Send
    + 'static,
) {
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "PostgreSQL connection ended");
        }
    });
}

/// sslmode=require: encrypt, but (as libpq) do not verify who the server is.
#[derive(Debug)]
struct AcceptAnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyServer {
    fn verify_server_cert(
        &self,
        _: &rustls_pki_types::CertificateDer<'_>,
        _: &[rustls_pki_types::CertificateDer<'_>],
        _: &rustls_pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls_pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A PostgreSQL identifier, always quoted: `"a ""b"""`.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A string literal that means the same whatever `standard_conforming_strings` says:
/// `E'it''s a \\ path'`.
pub fn quote_literal(value: &str) -> String {
    format!("E'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

/// A table name as configured: `table` or `schema.table`, each part optionally in double
/// quotes (which may then hold dots and `""`). Unquoted parts are taken as written (case
/// kept), since they are quoted in every statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    pub schema: String,
    pub table: String,
}

impl TableName {
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: &str| {
            Error::Config(format!(
                "target.table_name {text:?}: {why}; write table, schema.table or \"quoted name\""
            ))
        };
        let mut parts = Vec::new();
        let mut current = String::new();
        let mut chars = text.trim().chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', false) if current.is_empty() => quoted = true,
                ('"', true) if chars.peek() == Some(&'"') => {
                    chars.next();
                    current.push('"');
                }
                ('"', true) => quoted = false,
                ('.', false) => parts.push(std::mem::take(&mut current)),
                (c, _) => current.push(c),
            }
        }
        if quoted {
            return Err(bad("unclosed double quote"));
        }
        parts.push(current);
        if parts.iter().any(|p| p.is_empty()) {
            return Err(bad("empty name"));
        }
        match parts.as_slice() {
            [table] => Ok(Self {
                schema: "public".into(),
                table: table.clone(),
            }),
            [schema, table] => Ok(Self {
                schema: schema.clone(),
                table: table.clone(),
            }),
            _ => Err(bad("more than two parts")),
        }
    }

    /// `"schema"."table"`.
    pub fn sql(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.table))
    }

    /// The same schema, another table name.
    pub fn sibling(&self, table: &str) -> Self {
        Self {
            schema: self.schema.clone(),
            table: table.to_string(),
        }
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.sql())
    }
}

/// A PostgreSQL error as ours, with the server's detail (e.g. the constraint broken). Errors
/// about a row's data (SQLSTATE classes 22 and 23) never carry the row: PostgreSQL's detail
/// (`Failing row contains (…)`) and a data exception's message quote its values, which would
/// reach logs and failure records; the column is named instead.
pub fn pg_error(doing: &str, e: tokio_postgres::Error) -> Error {
    let retryable = e.as_db_error().is_none_or(|db| {
        // serialization failure, deadlock, admin shutdown, too many connections
        matches!(db.code().code(), "40001" | "40P01" | "57P01" | "53300")
    });
    let message = match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            let column = db
                .column()
                .map(|c| format!(" of column {c}"))
                .unwrap_or_default();
            match (code.get(..2), db.detail()) {
                (Some("22"), _) => format!(
                    "{doing}: PostgreSQL refused a value{column} (SQLSTATE {code}); the value is left out of this message"
                ),
                (Some("23"), _) => format!(
                    "{doing}: {} (SQLSTATE {code}; the row's values are left out of this message)",
                    db.message()
                ),
                (_, Some(detail)) => format!("{doing}: {} ({detail})", db.message()),
                (_, None) => format!("{doing}: {}", db.message()),
            }
        }
        None => format!("{doing}: {e}"),
    };
    Error::Postgres { message, retryable }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_parse_with_quotes_dots_and_spaces() {
        let t = TableName::parse("orders").unwrap();
        assert_eq!((t.schema.as_str(), t.table.as_str()), ("public", "orders"));
        let t = TableName::parse("Sales.Order Lines").unwrap();
        assert_eq!(
            (t.schema.as_str(), t.table.as_str()),
            ("Sales", "Order Lines")
        );
        let t = TableName::parse(r#""my.schema"."odd ""name""""#).unwrap();
        assert_eq!(
            (t.schema.as_str(), t.table.as_str()),
            ("my.schema", r#"odd "name""#)
        );
        assert_eq!(t.sql(), r#""my.schema"."odd ""name""""#);
        for bad in ["", "a..b", "a.b.c", r#""open"#] {
            assert!(TableName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sslmodes_parse_and_refuse_the_unknown() {
        assert_eq!(SslMode::parse("verify-full").unwrap(), SslMode::VerifyFull);
        assert_eq!(SslMode::parse("require").unwrap(), SslMode::Require);
        let err = SslMode::parse("sometimes").unwrap_err().to_string();
        assert!(err.contains("verify-full"), "{err}");
    }

    #[test]
    fn the_password_never_shows() {
        let c = Connection::new(
            Some("postgres://app:s3cret@db.example:6543/shop?sslmode=require"),
            None,
            &|_| None,
        )
        .unwrap();
        assert_eq!(c.to_string(), "db.example:6543/shop as app");
        assert!(!format!("{:?}", c.config).contains("s3cret"));
        assert_eq!(c.ssl, Some(SslMode::Require));
    }

    #[test]
    fn connections_verify_by_default_and_never_send_the_password_unverified_unless_allowed() {
        let at = |url: &str| Connection::new(Some(url), None, &|_| None).unwrap();
        let default = at("postgres://app@db:5432/shop")
            .verified(None, false)
            .unwrap();
        assert_eq!(default.ssl(), SslMode::VerifyFull);
        for mode in ["disable", "allow", "prefer", "require"] {
            let url = format!("postgres://app@db:5432/shop?sslmode={mode}");
            let err = at(&url).verified(None, false).err().unwrap().to_string();
            assert!(err.contains("POSTGRES_ALLOW_INSECURE"), "{err}");
            assert!(at(&url).verified(None, true).is_ok(), "{mode}");
        }
    }
}
