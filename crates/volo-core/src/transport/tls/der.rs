//! The few fields of an X.509 certificate that the pinned path needs (validity and
//! public key), read from its DER without assuming a version: webpki refuses to parse
//! version 1 certificates (such as Apache's test `client.crt`), which OpenSSL-based
//! peers still present.
//!
//! Only certificates from the configured trust file are read here, and only once,
//! when the configuration is built; a peer's certificate is compared with them byte
//! for byte, never parsed by this module. The reader is still strict: every length is
//! checked against what remains, and anything unexpected is `None`.

use rustls::pki_types::UnixTime;

/// DER tags used below.
const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0] EXPLICIT Version` of a v2 or v3 certificate.
const VERSION: u8 = 0xa0;

/// What the pinned path reads from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CertFields<'a> {
    /// `notBefore`, in seconds since the Unix epoch.
    pub(super) not_before: u64,
    /// `notAfter`, likewise.
    pub(super) not_after: u64,
    /// The whole `SubjectPublicKeyInfo`, tag and length included.
    pub(super) spki: &'a [u8],
    /// The contents of the key's `AlgorithmIdentifier` (what
    /// `SignatureVerificationAlgorithm::public_key_alg_id` is compared with).
    pub(super) key_algorithm: &'a [u8],
    /// The `subjectPublicKey` bits, without the BIT STRING's unused-bits byte.
    pub(super) key: &'a [u8],
}

impl CertFields<'_> {
    /// The validity period as rustls' times.
    pub(super) fn validity(&self) -> (UnixTime, UnixTime) {
        (
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(self.not_before)),
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(self.not_after)),
        )
    }
}

/// One DER element at the front of `input`: its tag, its contents and the whole
/// element; `input` moves past it. Definite lengths of up to 4 bytes only.
fn element<'a>(input: &mut &'a [u8]) -> Option<(u8, &'a [u8], &'a [u8])> {
    let all = *input;
    let (&tag, rest) = all.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = match first {
        0..=0x7f => usize::from(first),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let (bytes, after) = rest.split_at_checked(n)?;
            rest = after;
            bytes
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
        }
        // Indefinite (0x80) and longer lengths are not DER for a certificate.
        _ => return None,
    };
    let (contents, after) = rest.split_at_checked(len)?;
    let whole = &all[..all.len() - after.len()];
    *input = after;
    Some((tag, contents, whole))
}

/// The contents of an element of tag `tag` at the front of `input`.
fn expect<'a>(input: &mut &'a [u8], tag: u8) -> Option<&'a [u8]> {
    match element(input)? {
        (t, contents, _) if t == tag => Some(contents),
        _ => None,
    }
}

/// Reads the fields of a DER certificate (any version).
pub(super) fn cert_fields(der: &[u8]) -> Option<CertFields<'_>> {
    let mut input = der;
    let mut cert = expect(&mut input, SEQUENCE)?;
    if !input.is_empty() {
        return None;
    }
    let mut tbs = expect(&mut cert, SEQUENCE)?;
    if tbs.first() == Some(&VERSION) {
        element(&mut tbs)?;
    }
    expect(&mut tbs, INTEGER)?; // serialNumber
    expect(&mut tbs, SEQUENCE)?; // signature
    expect(&mut tbs, SEQUENCE)?; // issuer
    let mut validity = expect(&mut tbs, SEQUENCE)?;
    let not_before = time(&mut validity)?;
    let not_after = time(&mut validity)?;
    expect(&mut tbs, SEQUENCE)?; // subject
    let (tag, mut spki_contents, spki) = element(&mut tbs)?;
    if tag != SEQUENCE {
        return None;
    }
    let key_algorithm = expect(&mut spki_contents, SEQUENCE)?;
    let bits = expect(&mut spki_contents, BIT_STRING)?;
    // A key is whole bytes: no unused bits.
    let (&0, key) = bits.split_first()? else {
        return None;
    };
    Some(CertFields {
        not_before,
        not_after,
        spki,
        key_algorithm,
        key,
    })
}

/// A `Time` (RFC 5280 4.1.2.5: `UTCTime` as `YYMMDDHHMMSSZ` for 1950 to 2049,
/// `GeneralizedTime` as `YYYYMMDDHHMMSSZ`), in seconds since the Unix epoch.
fn time(input: &mut &[u8]) -> Option<u64> {
    let (tag, text, _) = element(input)?;
    let (year, rest) = match (tag, text.len()) {
        (UTC_TIME, 13) => {
            let yy = digits(&text[..2])?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &text[2..])
        }
        (GENERALIZED_TIME, 15) => (digits(&text[..4])?, &text[4..]),
        _ => return None,
    };
    if rest[10] != b'Z' {
        return None;
    }
    let month = digits(&rest[0..2])?;
    let day = digits(&rest[2..4])?;
    let hour = digits(&rest[4..6])?;
    let minute = digits(&rest[6..8])?;
    let second = digits(&rest[8..10])?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // 60: a leap second, as RFC 5280 allows.
    if second > 60 || year < 1970 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// ASCII decimal digits as a number.
fn digits(text: &[u8]) -> Option<u64> {
    text.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
    })
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar, from 1970 on
/// (Howard Hinnant's `days_from_civil`, for years that are not negative).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    // Years start in March, so that the leap day is the last of its year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    // 719,468 days from 0000-03-01 to 1970-01-01.
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> Vec<u8> {
        let mut v = vec![UTC_TIME, text.len() as u8];
        v.extend_from_slice(text.as_bytes());
        v
    }

    fn generalized(text: &str) -> Vec<u8> {
        let mut v = vec![GENERALIZED_TIME, text.len() as u8];
        v.extend_from_slice(text.as_bytes());
        v
    }

    #[test]
    fn times_become_seconds_since_the_epoch() {
        for (der, want) in [
            (utc("700101000000Z"), 0),
            // `date -u -d 2026-08-20T15:48:10Z +%s`
            (utc("260820154810Z"), 1_787_240_890),
            (utc("491231235959Z"), 2_524_607_999),
            (generalized("20341106154810Z"), 2_046_440_890),
            // A leap day, and the day after.
            (generalized("20240229000000Z"), 1_709_164_800),
            (generalized("20240301000000Z"), 1_709_251_200),
        ] {
            assert_eq!(time(&mut der.as_slice()), Some(want), "{der:02x?}");
        }
        for bad in [
            utc("500101000000Z"), // 1950: before the epoch
            utc("700101000000"),  // no Z
            utc("701301000000Z"), // month 13
            utc("70010100000aZ"), // not a digit
            utc("7001010000Z"),   // too short
            generalized("19691231235959Z"),
            generalized("2024022900000Z"),
            vec![
                0x04, 13, b'7', b'0', b'0', b'1', b'0', b'1', b'0', b'0', b'0', b'0', b'0', b'0',
                b'Z',
            ],
        ] {
            assert_eq!(time(&mut bad.as_slice()), None, "{bad:02x?}");
        }
    }

    #[test]
    fn lengths_are_checked_against_what_remains() {
        assert_eq!(element(&mut &[0x30, 0x03, 1, 2][..]), None);
        assert_eq!(element(&mut &[0x30, 0x82, 0x00][..]), None);
        assert_eq!(element(&mut &[0x30, 0x80, 0, 0][..]), None, "indefinite");
        assert_eq!(element(&mut &[0x30, 0x85, 1, 1, 1, 1, 1][..]), None);
        let mut two = &[0x02, 0x01, 0x05, 0x30, 0x81, 0x01, 0xaa][..];
        assert_eq!(element(&mut two), Some((0x02, &[5][..], &[2, 1, 5][..])));
        assert_eq!(
            element(&mut two),
            Some((0x30, &[0xaa][..], &[0x30, 0x81, 1, 0xaa][..]))
        );
        assert!(two.is_empty());
    }

    #[test]
    fn a_generated_certificate_reads_back_its_validity_and_key() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["x.test".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2001, 2, 3);
        params.not_after = rcgen::date_time_ymd(2061, 4, 5);
        let cert = params.self_signed(&key).unwrap();
        let fields = cert_fields(cert.der()).expect("fields");
        assert_eq!(fields.not_before, 981_158_400, "2001-02-03");
        assert_eq!(fields.not_after, 2_879_884_800, "2061-04-05");
        let spki = rcgen::PublicKeyData::subject_public_key_info(&key);
        assert_eq!(fields.spki, spki.as_slice());
        assert_eq!(fields.key, key.public_key_raw());
        // rcgen's default key is ECDSA P-256: id-ecPublicKey with the curve's OID.
        assert_eq!(
            fields.key_algorithm,
            rustls::pki_types::alg_id::ECDSA_P256.as_ref()
        );
    }

    proptest::proptest! {
        /// Any bytes, and any cut or change of a real certificate, give fields or
        /// `None`, never a panic.
        #[test]
        fn garbage_is_none_or_fields(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = cert_fields(&bytes);
        }

        #[test]
        fn a_damaged_certificate_never_panics(cut in 0usize..600, at in 0usize..600, byte in proptest::num::u8::ANY) {
            let der = sample();
            let mut damaged = der[..cut.min(der.len())].to_vec();
            if let Some(b) = damaged.get_mut(at) {
                *b = byte;
            }
            let _ = cert_fields(&damaged);
        }
    }

    fn sample() -> Vec<u8> {
        static DER: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        DER.get_or_init(|| {
            let key = rcgen::KeyPair::generate().unwrap();
            let params = rcgen::CertificateParams::new(vec!["x.test".into()]).unwrap();
            params.self_signed(&key).unwrap().der().to_vec()
        })
        .clone()
    }
}
