//! Which addresses webhooks may be sent to: the SSRF guard. Customers type
//! endpoint URLs, so by default nothing on the machine's own networks is a
//! valid target: loopback, private, link-local, CGNAT, multicast,
//! unspecified, reserved and cloud-metadata addresses, on IPv4 and IPv6,
//! including IPv4 addresses embedded in IPv6 ones. The check runs when an
//! endpoint is saved and again on every address a send resolves to, and
//! the request connects only to addresses that passed (no DNS rebinding).

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use hickory_resolver::TokioResolver;
use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    /// `--allow-private-targets`: no address is refused.
    pub allow_private: bool,
    /// `--allow-subnets`: these are allowed even if they would be refused.
    pub allowed: Vec<IpNet>,
}

/// Why an address may not be a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("blocked: {address} is a {kind} address (see --allow-subnets)")]
pub struct Blocked {
    pub address: IpAddr,
    pub kind: &'static str,
}

impl TargetPolicy {
    pub fn is_relaxed(&self) -> bool {
        self.allow_private || !self.allowed.is_empty()
    }

    pub fn check(&self, address: IpAddr) -> Result<(), Blocked> {
        if self.allow_private {
            return Ok(());
        }
        let embedded = match address {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        let allowed = |ip: IpAddr| self.allowed.iter().any(|net| net.contains(&ip));
        if allowed(address) || embedded.is_some_and(allowed) {
            return Ok(());
        }
        match refused_kind(address) {
            Some(kind) => Err(Blocked { address, kind }),
            None => Ok(()),
        }
    }

    /// The host of an endpoint URL, before any lookup: literal addresses
    /// (every numeric form, which `url` has already normalized) and the
    /// `localhost` names.
    pub fn check_host(&self, host: &url::Host<&str>) -> Result<(), Blocked> {
        match host {
            url::Host::Ipv4(v4) => self.check(IpAddr::V4(*v4)),
            url::Host::Ipv6(v6) => self.check(IpAddr::V6(*v6)),
            url::Host::Domain(name) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if name == "localhost" || name.ends_with(".localhost") {
                    self.check(IpAddr::V4(Ipv4Addr::LOCALHOST))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The check at save time: the host, then every address its name has
    /// now. A name that does not resolve yet is accepted; the send checks
    /// again.
    pub async fn check_url(&self, url: &url::Url) -> Result<(), Blocked> {
        let Some(host) = url.host() else {
            return Ok(());
        };
        self.check_host(&host)?;
        if self.allow_private {
            return Ok(());
        }
        if let url::Host::Domain(name) = host {
            let port = url.port_or_known_default().unwrap_or(443);
            let lookup = Lookup::system();
            let found =
                tokio::time::timeout(Duration::from_secs(3), lookup.addresses(name, port)).await;
            if let Ok(Ok(addresses)) = found {
                for a in addresses {
                    self.check(a.ip())?;
                }
            }
        }
        Ok(())
    }

    /// A resolver for the delivery client that hands reqwest only the
    /// addresses that pass, so the connection goes to a checked address.
    pub fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver {
            policy: self.clone(),
            lookup: Arc::new(Lookup::system()),
        })
    }
}

/// The system's name servers and hosts file, asked from the async runtime
/// (hickory): the system resolver (getaddrinfo) runs on tokio's blocking
/// pool, where a flood of other blocking work, password hashing say,
/// would make deliveries wait for a thread just to look up a name. Made
/// where it is used: its connections belong to the runtime that made it.
pub struct Lookup(Option<TokioResolver>);

impl Lookup {
    pub fn system() -> Lookup {
        match TokioResolver::builder_tokio().and_then(|b| b.build()) {
            Ok(resolver) => Lookup(Some(resolver)),
            Err(e) => {
                tracing::warn!(error = %e, "no DNS configuration to read; names are resolved by the system");
                Lookup(None)
            }
        }
    }

    /// The addresses of `name`, with `port`.
    async fn addresses(&self, name: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        match &self.0 {
            Some(resolver) => {
                let found = resolver
                    .lookup_ip(name)
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                Ok(found.iter().map(|ip| SocketAddr::new(ip, port)).collect())
            }
            None => Ok(tokio::net::lookup_host((name, port)).await?.collect()),
        }
    }
}

pub struct GuardedResolver {
    policy: TargetPolicy,
    lookup: Arc<Lookup>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let lookup = Arc::clone(&self.lookup);
        Box::pin(async move {
            let found = lookup.addresses(name.as_str(), 0).await?;
            let mut first_refusal = None;
            let passed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.check(a.ip()) {
                    Ok(()) => true,
                    Err(b) => {
                        first_refusal.get_or_insert(b);
                        false
                    }
                })
                .collect();
            match (passed.is_empty(), first_refusal) {
                (true, Some(blocked)) => Err(Box::new(blocked) as Box<_>),
                _ => Ok(Box::new(passed.into_iter()) as Addrs),
            }
        })
    }
}

/// The IPv4 address inside an IPv4-mapped, IPv4-compatible, NAT64 or 6to4
/// IPv6 address: each reaches that IPv4 address.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    match s {
        // ::a.b.c.d (deprecated IPv4-compatible), but not :: and ::1.
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => Some(tail),
        // 64:ff9b::/96, the well-known NAT64 prefix.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        // 2002:AABB:CCDD::/48, 6to4.
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

fn refused_kind(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return refused_v4(v4);
            }
            let seg = v6.segments();
            let first = seg[0];
            if v6.is_loopback() {
                Some("loopback")
            } else if first == 0x2001 && seg[1] == 0 {
                // Teredo (2001::/32) tunnels to an IPv4 address written
                // obfuscated inside: refused whatever it hides.
                Some("Teredo tunnel")
            } else if (first, seg[1], seg[2]) == (0x64, 0xff9b, 1) {
                // 64:ff9b:1::/48 (RFC 8215): a translator of the local network.
                Some("local-use NAT64")
            } else if seg[..6] == [0, 0, 0, 0, 0xffff, 0] {
                // ::ffff:0:0/96, IPv4-translated (SIIT): a translator's.
                Some("IPv4-translated (SIIT)")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if v6.is_multicast() {
                Some("multicast")
            } else if first & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if first & 0xffc0 == 0xfec0 {
                Some("site-local")
            } else if first & 0xfe00 == 0xfc00 {
                // Includes fd00:ec2::254, the EC2 metadata service.
                Some("private")
            } else if first == 0x2001 && v6.segments()[1] == 0x0db8 {
                Some("documentation")
            } else {
                None
            }
        }
    }
}

fn refused_v4(v4: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = v4.octets();
    if v4 == Ipv4Addr::new(169, 254, 169, 254) || v4 == Ipv4Addr::new(100, 100, 100, 200) {
        Some("cloud metadata")
    } else if v4.is_loopback() {
        Some("loopback")
    } else if a == 0 {
        Some("unspecified")
    } else if v4.is_private() {
        Some("private")
    } else if v4.is_link_local() {
        Some("link-local")
    } else if a == 100 && b & 0xc0 == 64 {
        Some("shared (CGNAT)")
    } else if v4.is_multicast() {
        Some("multicast")
    } else if a >= 240 || (a, b, c) == (192, 0, 0) || (a == 198 && b & 0xfe == 18) {
        Some("reserved")
    } else if matches!((a, b, c), (192, 0, 2) | (198, 51, 100) | (203, 0, 113)) {
        Some("documentation")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_of(url: &str) -> Result<(), Blocked> {
        let url = url::Url::parse(url).unwrap();
        TargetPolicy::default().check_host(&url.host().unwrap())
    }

    #[test]
    fn every_form_of_a_refused_address_is_refused() {
        for url in [
            "http://127.0.0.1/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://localhost:8080/",
            "http://api.localhost/",
            "http://0.0.0.0/",
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://100.64.0.1/",
            "http://100.100.100.200/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
            "http://[::1]/",
            "http://[::]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::a00:1]/",
            "http://[2002:7f00:1::]/",
            "http://[fe80::1]/",
            "http://[fd00:ec2::254]/",
            "http://[fc00::1]/",
            "http://[ff02::1]/",
            "http://[64:ff9b:1::a00:1]/",
            "http://[64:ff9b:1:ffff::7f00:1]/",
            "http://[::ffff:0:7f00:1]/",
            "http://[::ffff:0:a9fe:a9fe]/",
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
            "http://[2001::1]/",
            "http://[64:ff9b:1::5db8:d822]/",
            "http://[::ffff:0:5db8:d822]/",
        ] {
            assert!(host_of(url).is_err(), "{url} must be refused");
        }
    }

    #[test]
    fn public_addresses_and_names_pass() {
        for url in [
            "https://93.184.216.34/",
            "https://[2606:2800:220:1:248:1893:25c8:1946]/",
            "https://hooks.example.com/in",
            "https://8.8.8.8/",
        ] {
            assert_eq!(host_of(url), Ok(()), "{url}");
        }
    }

    #[test]
    fn the_allow_list_and_the_switch_open_it() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let listed = TargetPolicy {
            allow_private: false,
            allowed: vec!["127.0.0.1/32".parse().unwrap()],
        };
        assert_eq!(listed.check(loopback), Ok(()));
        assert_eq!(listed.check("::ffff:127.0.0.1".parse().unwrap()), Ok(()));
        assert!(listed.check("127.0.0.2".parse().unwrap()).is_err());
        assert!(listed.check("10.0.0.1".parse().unwrap()).is_err());
        let open = TargetPolicy {
            allow_private: true,
            allowed: vec![],
        };
        assert_eq!(open.check("10.0.0.1".parse().unwrap()), Ok(()));
        let err = TargetPolicy::default().check(loopback).unwrap_err();
        assert_eq!(
            err.to_string(),
            "blocked: 127.0.0.1 is a loopback address (see --allow-subnets)"
        );
    }
}
