//! What a socket of this machine is bound to on a port, read from
//! `/proc/net/{tcp,tcp6,udp,udp6}`: host jobs share the machine's network
//! namespace and have no mapping, so readiness probes, and the card shows,
//! the address the job really bound (`0.0.0.0:8000`, `[::1]:8000`,
//! `192.168.1.5:8000`) rather than assuming 127.0.0.1.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::model::Proto;

/// The address a socket of this network namespace is bound to on `port`
/// (TCP: listening; UDP: bound), or None when nothing is (or /proc cannot
/// be read). IPv4 first.
pub fn bound(port: u16, proto: Proto) -> Option<SocketAddr> {
    let (files, state) = match proto {
        Proto::Tcp => (["/proc/net/tcp", "/proc/net/tcp6"], "0A"),
        Proto::Udp => (["/proc/net/udp", "/proc/net/udp6"], "07"),
    };
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .find_map(|table| find_bound(&table, port, state))
}

/// The first socket of a `/proc/net/tcp`-style `table` in `state` on `port`.
fn find_bound(table: &str, port: u16, state: &str) -> Option<SocketAddr> {
    table.lines().skip(1).find_map(|line| {
        let mut f = line.split_whitespace();
        let local = f.nth(1)?;
        let st = f.nth(1)?;
        let (ip, p) = local.split_once(':')?;
        (st == state && u16::from_str_radix(p, 16).ok()? == port).then_some(())?;
        Some(SocketAddr::new(parse_ip(ip)?, port))
    })
}

/// An address as `/proc/net` prints it: 32-bit words in host byte order.
fn parse_ip(hex: &str) -> Option<IpAddr> {
    let words = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok())
        .collect::<Option<Vec<u32>>>()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    match bytes.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))),
        16 => {
            let arr: [u8; 16] = bytes.try_into().ok()?;
            let v6 = Ipv6Addr::from(arr);
            Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
        }
        _ => None,
    }
}

/// Where to connect to reach a server bound at `addr`: the loopback of its
/// family when it is bound to every address.
pub fn reach(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
        _ => addr,
    }
}

/// Where a host job's server on `port` can be reached: what it bound, else
/// 127.0.0.1 (a connect there then says "nothing listens").
pub fn probe_addr(port: u16) -> SocketAddr {
    bound(port, Proto::Tcp)
        .map(reach)
        .unwrap_or_else(|| SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tables_are_read_in_host_byte_order() {
        // 0.0.0.0:8000 listening, 127.0.0.1:8001 established, [::1]:8002 listening.
        let v4 = "  sl  local_address rem_address   st\n   0: 00000000:1F40 00000000:0000 0A 0\n   1: 0100007F:1F41 0100007F:9999 01 0\n";
        assert_eq!(find_bound(v4, 8000, "0A"), Some("0.0.0.0:8000".parse().unwrap()));
        assert_eq!(find_bound(v4, 8001, "0A"), None, "not listening");
        let v6 = "  sl  local_address rem_address st\n   0: 00000000000000000000000001000000:1F42 00000000000000000000000000000000:0000 0A 0\n";
        assert_eq!(find_bound(v6, 8002, "0A"), Some("[::1]:8002".parse().unwrap()));
        assert_eq!(
            reach("0.0.0.0:8000".parse().unwrap()),
            "127.0.0.1:8000".parse().unwrap()
        );
    }

    #[test]
    fn a_real_listener_is_seen_with_its_address() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(bound(port, Proto::Tcp), Some(l.local_addr().unwrap()));
        drop(l);
        assert_eq!(bound(port, Proto::Tcp), None);
    }
}
