//! `DB_IAM_AUTH=true`: the password of every new database connection is an RDS/Aurora IAM
//! auth token minted in process, the password source beside `DATABASE_PASSWORD_COMMAND`
//! ([`super::signin::PasswordSource`]; the same refresher keeps it fresh).
//!
//! A token is what botocore's `generate_db_auth_token` and `aws rds generate-db-auth-token`
//! print: the URL `https://<host>:<port>/?Action=connect&DBUser=<user>` presigned with SigV4
//! for the service `rds-db` (valid [`TOKEN_LIFETIME`]), less its `https://`. Host, port and
//! user are `DATABASE_URL`'s. RDS checks it at sign-in only (an open session outlives its
//! token), so one minted after each new connection and every few seconds is always fresh.
//! The signature is AWS's own signer (`aws-sigv4`, [`presign_get`]); the clock is an argument,
//! so the tests pin it against AWS's published vectors and botocore's output.
//!
//! Credentials and region come from the standard AWS chain (`aws-config`'s defaults):
//! `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`(/`AWS_SESSION_TOKEN`), `AWS_PROFILE` and the
//! shared config/credentials files (with `credential_process`), web identity
//! (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`: EKS IRSA), the ECS container endpoint
//! and EC2 instance metadata; the region from `AWS_REGION`, `AWS_DEFAULT_REGION`, the
//! profile or instance metadata, or [`IAM_REGION_VAR`] over all of them. Both must resolve
//! at boot within [`RESOLVE_TIMEOUT`] or the boot stops naming `DB_IAM_AUTH`. Credentials
//! are reused until five minutes before they expire (temporary ones) or for five minutes
//! (long-lived ones), so a rotated key is followed without asking STS for every token.
//!
//! RDS refuses IAM tokens without TLS, and a token must never cross the network in clear
//! text: `DATABASE_URL` must say `sslmode=require`, `verify-ca` or `verify-full`
//! ([`check_url`]). Neither a token nor a secret key is ever logged.

use std::{
    borrow::Cow,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use aws_config::{BehaviorVersion, Region};
use aws_credential_types::{
    Credentials,
    provider::{ProvideCredentials, SharedCredentialsProvider},
};
use aws_sigv4::{
    http_request::{SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign},
    sign::v4,
};
use aws_smithy_types::error::display::DisplayErrorContext;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sqlx::postgres::{PgConnectOptions, PgSslMode};

/// The setting that turns IAM tokens on (`true`).
pub const IAM_AUTH_VAR: &str = "DB_IAM_AUTH";
/// The setting naming the region tokens are signed for, over the AWS chain's.
pub const IAM_REGION_VAR: &str = "DB_IAM_REGION";
/// How long a token is valid (RDS's maximum, and what botocore mints).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// How long the AWS chain may take at boot to name a region and give credentials (and, once
/// running, to renew them): instance metadata off EC2 answers nothing, and the boot must not
/// hang on it.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// The SigV4 service name of database sign-in.
const SERVICE: &str = "rds-db";
/// Credentials are renewed this long before they expire (or after this long, if they never
/// do).
const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);

/// What SigV4 leaves unescaped in a query: the unreserved characters of RFC 3986.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Why no token could be minted. Each message names `DB_IAM_AUTH` (or `DATABASE_URL`) and
/// never holds a token or a secret key.
#[derive(Debug, thiserror::Error)]
pub enum IamError {
    /// The AWS chain names no region.
    #[error(
        "DB_IAM_AUTH: no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, a profile's \
         region, or DB_IAM_REGION)"
    )]
    NoRegion,
    /// The AWS chain gave no credentials within [`RESOLVE_TIMEOUT`].
    #[error(
        "DB_IAM_AUTH: no AWS credentials within {0:?} from the standard chain \
         (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and its files, \
         AWS_WEB_IDENTITY_TOKEN_FILE, the ECS container endpoint, EC2 instance metadata)"
    )]
    Timeout(Duration),
    /// The AWS chain answered without credentials.
    #[error("DB_IAM_AUTH: no AWS credentials from the standard chain: {0}")]
    Credentials(String),
    /// `DATABASE_URL` cannot carry a token.
    #[error("DATABASE_URL: {0}")]
    Url(String),
    /// The signer refused its input.
    #[error("DB_IAM_AUTH: signing the token failed: {0}")]
    Sign(String),
}

/// Where tokens are for: `DATABASE_URL`'s host, port and user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The database's host name (an RDS or Aurora endpoint, or a proxy's).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The database user (`GRANT rds_iam TO <user>`).
    pub user: String,
}

/// Checks that `opts` (parsed `DATABASE_URL`) can carry a token: TLS required
/// (`sslmode=require`, `verify-ca` or `verify-full`; RDS refuses IAM tokens in clear text,
/// and a token must never cross a network unencrypted), a TCP host, a user; returns where
/// tokens are for.
pub fn check_url(opts: &PgConnectOptions) -> Result<Endpoint, IamError> {
    if !matches!(
        opts.get_ssl_mode(),
        PgSslMode::Require | PgSslMode::VerifyCa | PgSslMode::VerifyFull
    ) {
        return Err(IamError::Url(format!(
            "DB_IAM_AUTH needs TLS: add sslmode=verify-full (with sslrootcert= the RDS CA \
             bundle), verify-ca or require (it is {:?}); an IAM token must never cross the \
             network in clear text",
            opts.get_ssl_mode()
        )));
    }
    if opts.get_socket().is_some() || opts.get_host().starts_with('/') {
        return Err(IamError::Url(
            "DB_IAM_AUTH needs a TCP host (the database's endpoint), not a socket".into(),
        ));
    }
    if opts.get_username().is_empty() {
        return Err(IamError::Url("DB_IAM_AUTH needs a user in the URL".into()));
    }
    Ok(Endpoint {
        host: opts.get_host().to_string(),
        port: opts.get_port(),
        user: opts.get_username().to_string(),
    })
}

/// Presigns a GET of `url` (already percent-encoded) for `service` in `region` with
/// `credentials` at `time`, valid `expires_in`: the URL with its SigV4 query parameters
/// appended (X-Amz-Algorithm, -Credential, -Date, -Expires, -SignedHeaders, the session
/// token when there is one, X-Amz-Signature last, as botocore orders them).
pub fn presign_get(
    url: &str,
    credentials: &Credentials,
    region: &str,
    service: &str,
    time: SystemTime,
    expires_in: Duration,
) -> Result<String, IamError> {
    let sign_err = |e: &dyn std::fmt::Display| IamError::Sign(e.to_string());
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(expires_in);
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| sign_err(&e))?
        .into();
    let request = SignableRequest::new("GET", url, std::iter::empty(), SignableBody::Bytes(&[]))
        .map_err(|e| sign_err(&e))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| sign_err(&e))?
        .into_parts();
    let (_, query) = instructions.into_parts();
    let mut out = String::with_capacity(url.len() + 512);
    out.push_str(url);
    let mut sep = if url.contains('?') { '&' } else { '?' };
    let mut signature: Option<Cow<'_, str>> = None;
    for (name, value) in query {
        if name == "X-Amz-Signature" {
            signature = Some(value);
            continue;
        }
        out.push(sep);
        out.push_str(name);
        out.push('=');
        out.extend(utf8_percent_encode(&value, QUERY));
        sep = '&';
    }
    let signature = signature.ok_or_else(|| IamError::Sign("no signature".into()))?;
    out.push(sep);
    out.push_str("X-Amz-Signature=");
    out.push_str(&signature);
    Ok(out)
}

/// The RDS IAM auth token for `endpoint` in `region` with `credentials` at `time` (see the
/// module documentation): what botocore's `generate_db_auth_token` returns.
pub fn auth_token(
    endpoint: &Endpoint,
    region: &str,
    credentials: &Credentials,
    time: SystemTime,
) -> Result<String, IamError> {
    const SCHEME: &str = "https://";
    let url = format!(
        "{SCHEME}{}:{}/?Action=connect&DBUser={}",
        endpoint.host,
        endpoint.port,
        utf8_percent_encode(&endpoint.user, QUERY)
    );
    let signed = presign_get(&url, credentials, region, SERVICE, time, TOKEN_LIFETIME)?;
    Ok(signed[SCHEME.len()..].to_string())
}

/// Mints tokens for one database endpoint from the AWS chain's credentials (cached, see
/// the module documentation).
pub struct IamAuth {
    endpoint: Endpoint,
    region: String,
    provider: SharedCredentialsProvider,
    cached: tokio::sync::Mutex<Option<(Credentials, Instant)>>,
}

impl std::fmt::Debug for IamAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IamAuth")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl IamAuth {
    /// Resolves the region (`region`, [`IAM_REGION_VAR`]'s value, over the AWS chain's)
    /// and the credentials of the standard AWS chain for tokens to `endpoint`, within
    /// [`RESOLVE_TIMEOUT`] each: either missing is an error naming `DB_IAM_AUTH`.
    pub async fn from_chain(
        endpoint: Endpoint,
        region: Option<String>,
    ) -> Result<Arc<IamAuth>, IamError> {
        // The chain's HTTP calls (STS for web identity, the ECS endpoint, instance
        // metadata) over rustls + ring, the provider the rest of converge uses.
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http);
        if let Some(r) = region {
            loader = loader.region(Region::new(r));
        }
        let sdk = tokio::time::timeout(RESOLVE_TIMEOUT, loader.load())
            .await
            .map_err(|_| IamError::Timeout(RESOLVE_TIMEOUT))?;
        let region = sdk.region().ok_or(IamError::NoRegion)?.to_string();
        let provider = sdk
            .credentials_provider()
            .ok_or_else(|| IamError::Credentials("no credentials provider".into()))?;
        let auth = IamAuth::with_provider(endpoint, region, provider);
        // Credentials now: a chain that cannot give them stops the boot.
        auth.credentials().await?;
        Ok(Arc::new(auth))
    }

    /// Tokens to `endpoint` in `region` from `provider` (credentials fetched when first
    /// needed).
    pub fn with_provider(
        endpoint: Endpoint,
        region: String,
        provider: SharedCredentialsProvider,
    ) -> IamAuth {
        IamAuth {
            endpoint,
            region,
            provider,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// The region tokens are signed for.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// A fresh token, signed now.
    pub async fn token(&self) -> Result<String, IamError> {
        let credentials = self.credentials().await?;
        auth_token(
            &self.endpoint,
            &self.region,
            &credentials,
            SystemTime::now(),
        )
    }

    /// The chain's credentials: the cached ones while fresh, else asked again (within
    /// [`RESOLVE_TIMEOUT`]); when the chain fails, credentials that have not expired yet
    /// are kept (and the failure logged).
    async fn credentials(&self) -> Result<Credentials, IamError> {
        let mut cached = self.cached.lock().await;
        let now = SystemTime::now();
        if let Some((c, fetched)) = &*cached {
            let fresh = match c.expiry() {
                Some(expiry) => expiry > now + RENEW_BEFORE,
                None => fetched.elapsed() < RENEW_BEFORE,
            };
            if fresh {
                return Ok(c.clone());
            }
        }
        let asked = tokio::time::timeout(RESOLVE_TIMEOUT, self.provider.provide_credentials())
            .await
            .map_err(|_| IamError::Timeout(RESOLVE_TIMEOUT))
            .and_then(|r| {
                r.map_err(|e| IamError::Credentials(DisplayErrorContext(&e).to_string()))
            });
        match asked {
            Ok(c) => {
                *cached = Some((c.clone(), Instant::now()));
                Ok(c)
            }
            Err(e) => match &*cached {
                Some((c, _)) if c.expiry().is_none_or(|x| x > now) => {
                    tracing::warn!(error = %e, "keeping the last AWS credentials for DB_IAM_AUTH");
                    Ok(c.clone())
                }
                _ => Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    /// AWS's documented example keys.
    const AKID: &str = "AKIDEXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    fn at(rfc3339: &str) -> SystemTime {
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .into()
    }

    /// AWS's SigV4 test suite, presigned ("query") variants: the aws-c-auth signing test
    /// suite (`tests/aws-signing-test-suite/v4/<case>/query-signed-request.txt`, shipped in
    /// aws-sigv4 1.6.6's `aws-signing-test-suite/v4`), context 2015-08-30T12:36:00Z,
    /// us-east-1, service `service`, 3600 s. The order of the parameters differs between
    /// signers (the suite puts X-Amz-Expires after X-Amz-SignedHeaders); the set and the
    /// signature must be the suite's.
    #[test]
    fn presigned_gets_match_the_sigv4_test_suite() {
        let plain = Credentials::new(AKID, SECRET, None, None, "test");
        let session = Credentials::new(
            AKID,
            SECRET,
            Some("6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267".into()),
            None,
            "test",
        );
        for (case, creds, url, want) in [
            (
                "get-vanilla-query-order-key-case",
                &plain,
                "https://example.amazonaws.com/?Param2=value2&Param1=value1",
                "/?Param2=value2&Param1=value1&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fservice%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-SignedHeaders=host&X-Amz-Expires=3600&X-Amz-Signature=86012e2c9ad4d77369f5d81c11f75158aae4f895a085212cc6d3f923d300bed5",
            ),
            (
                "get-vanilla",
                &plain,
                "https://example.amazonaws.com/",
                "/?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fservice%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-SignedHeaders=host&X-Amz-Expires=3600&X-Amz-Signature=e93c787ed7f371d5c6b165c1b38ede9550f4dce4144713e844b25b7192d3865d",
            ),
            (
                "get-vanilla-query-unreserved",
                &plain,
                "https://example.amazonaws.com/?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                "/?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fservice%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-SignedHeaders=host&X-Amz-Expires=3600&X-Amz-Signature=8e76a88a7433637b12778d5592799b29ad21ecd6cf6325051c21d86f0acda2bf",
            ),
            (
                "get-vanilla-with-session-token",
                &session,
                "https://example.amazonaws.com/",
                "/?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fservice%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-SignedHeaders=host&X-Amz-Expires=3600&X-Amz-Security-Token=6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267&X-Amz-Signature=7ff2b50b376cb4d151970630573d6291dc128cc5c2a12ffb237f73cc53f67b6c",
            ),
        ] {
            let got = presign_get(
                url,
                creds,
                "us-east-1",
                "service",
                at("2015-08-30T12:36:00Z"),
                Duration::from_secs(3600),
            )
            .unwrap();
            let query = |u: &str| -> (String, std::collections::BTreeSet<String>) {
                let (path, q) = u.split_once('?').unwrap();
                let path = path.trim_start_matches("https://example.amazonaws.com");
                (path.to_string(), q.split('&').map(str::to_string).collect())
            };
            assert_eq!(query(&got), query(want), "{case}: {got}");
            assert!(got.ends_with(want.rsplit_once('&').unwrap().1), "{case}");
        }
    }

    /// Tokens made by botocore 1.44.18's `generate_db_auth_token` for fixed credentials
    /// (AWS's example keys), clock 2026-05-04T12:36:00Z, hosts, ports, users and regions:
    /// the output of `engine/testdata/rds-iam/botocore_tokens.py` (the command is in its
    /// docstring), committed so this test needs no Python. Byte for byte, parameter order
    /// included.
    #[test]
    fn tokens_match_botocore() {
        let time = at("2026-05-04T12:36:00Z");
        let aurora = Endpoint {
            host: "mydb.cluster-abc123xyz.eu-west-1.rds.amazonaws.com".into(),
            port: 5432,
            user: "converge".into(),
        };
        assert_eq!(
            auth_token(
                &aurora,
                "eu-west-1",
                &Credentials::new(AKID, SECRET, None, None, "test"),
                time
            )
            .unwrap(),
            "mydb.cluster-abc123xyz.eu-west-1.rds.amazonaws.com:5432/?Action=connect&DBUser=converge&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20260504%2Feu-west-1%2Frds-db%2Faws4_request&X-Amz-Date=20260504T123600Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=028b504eb9123653b4b3591d73f35aeae18de28072fa60a2bdc6c8c23711bd41"
        );
        let other = Endpoint {
            host: "db.example.internal".into(),
            port: 6543,
            user: "app_user".into(),
        };
        assert_eq!(
            auth_token(
                &other,
                "us-east-1",
                &Credentials::new(
                    AKID,
                    SECRET,
                    Some("FQoGZXIvYXdzEXAMPLESESSIONTOKEN/+==".into()),
                    None,
                    "test"
                ),
                time
            )
            .unwrap(),
            "db.example.internal:6543/?Action=connect&DBUser=app_user&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20260504%2Fus-east-1%2Frds-db%2Faws4_request&X-Amz-Date=20260504T123600Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Security-Token=FQoGZXIvYXdzEXAMPLESESSIONTOKEN%2F%2B%3D%3D&X-Amz-Signature=944821105296f93893fd0197ebf8ebac504dcc59721b72b4099799d463c7b266"
        );
    }

    #[test]
    fn the_url_must_ask_for_tls_and_name_a_host_and_user() {
        let opts = |u: &str| PgConnectOptions::from_str(u).unwrap();
        for ok in ["require", "verify-ca", "verify-full"] {
            let e = check_url(&opts(&format!(
                "postgres://app@db.example:5433/app?sslmode={ok}"
            )))
            .unwrap();
            assert_eq!(
                e,
                Endpoint {
                    host: "db.example".into(),
                    port: 5433,
                    user: "app".into()
                }
            );
        }
        for bad in ["disable", "allow", "prefer"] {
            let e = check_url(&opts(&format!(
                "postgres://app@db.example/app?sslmode={bad}"
            )))
            .unwrap_err()
            .to_string();
            assert!(e.contains("DATABASE_URL") && e.contains("sslmode"), "{e}");
        }
        let e = check_url(&opts(
            "postgres://app@localhost/app?host=%2Frun%2Fpostgresql&sslmode=require",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("socket"), "{e}");
    }

    /// Credentials are asked of the provider again only when they are about to expire.
    #[tokio::test]
    async fn credentials_are_reused_until_near_expiry() {
        let endpoint = Endpoint {
            host: "db".into(),
            port: 5432,
            user: "u".into(),
        };
        let soon = Credentials::new(AKID, SECRET, None, Some(SystemTime::now()), "test");
        let auth = IamAuth::with_provider(
            endpoint.clone(),
            "eu-west-1".into(),
            SharedCredentialsProvider::new(soon),
        );
        // Already expired: the provider is asked each time, and still answers.
        let t = auth.token().await.unwrap();
        assert!(t.starts_with("db:5432/?Action=connect&DBUser=u&"), "{t}");
        assert!(t.contains("%2Feu-west-1%2Frds-db%2F"), "{t}");
        let long = Credentials::new(AKID, SECRET, None, None, "test");
        let auth = IamAuth::with_provider(
            endpoint,
            "eu-west-1".into(),
            SharedCredentialsProvider::new(long),
        );
        auth.token().await.unwrap();
        assert!(auth.cached.lock().await.is_some());
    }
}
