/// What a transport trusts for the hosts it reaches: a PEM file of certificate authorities used
/// instead of the system's, and public-key pins per host. A session's plan carries one for its provider
/// (`moose login --ca-file … --pin-public-key …`); whoever renews that session applies it
/// (`TrustConfigurableTransport`), so a refresh token never travels over a connection the person asked
/// to pin without the pin.
///
/// ```swift
/// let trust = TransportTrust(caFile: "/etc/ssl/corp-ca.pem",
///                            pins: try PublicKeyPins(["id.example.com": ["sha256//…"]]))
/// let transport = try CurlTransport().trusting(trust)
/// ```
public struct TransportTrust: Sendable, Hashable {
    /// A PEM file of the CAs to trust instead of the system's; `nil`: the transport's own choice stands.
    public var caFile: String?
    /// The keys each pinned host must present (checked after the certificate's normal verification).
    public var pins: PublicKeyPins

    /// A trust setting.
    ///
    /// - Parameters:
    ///   - caFile: a PEM file of CAs that replaces the transport's CA setting; `nil` (the default): unchanged.
    ///   - pins: public-key pins to add; empty (the default): none.
    public init(caFile: String? = nil, pins: PublicKeyPins = PublicKeyPins()) {
        self.caFile = caFile
        self.pins = pins
    }

    /// `true` when it changes nothing (no CA file, no pins).
    public var isEmpty: Bool { caFile == nil && pins.isEmpty }
}

/// A transport that can apply a `TransportTrust`: the library calls it wherever it renews a session
/// whose plan names a CA file or pins, and refuses (rather than renew unpinned) with a transport that
/// is not one. `CurlTransport` is one; an app's own transport (a wrapper adding logging or faults)
/// becomes one by forwarding to the transport it wraps.
public protocol TrustConfigurableTransport: HTTPTransport {
    /// This transport, trusting `trust` as well: its CA file instead of this transport's when it
    /// names one, and its pins, which replace this transport's pins for the hosts they name (other
    /// hosts keep theirs).
    ///
    /// - Throws: `HTTPRequestError.pinning` when the transport cannot check the pins it is given.
    func trusting(_ trust: TransportTrust) throws(HTTPRequestError) -> Self
}

extension PublicKeyPins {
    /// These pins with `other`'s: a host `other` pins takes `other`'s pins alone; the rest keep these.
    ///
    /// - Throws: `HTTPRequestError.pinning` when the two together pin more than `maximumHosts` hosts.
    public func merging(_ other: PublicKeyPins) throws(HTTPRequestError) -> PublicKeyPins {
        guard !other.isEmpty else { return self }
        var all: [String: [String]] = [:]
        for host in hosts { all[host] = pins(for: host) }
        for host in other.hosts { all[host] = other.pins(for: host) }
        return try PublicKeyPins(all)
    }
}

extension CurlTransport: TrustConfigurableTransport {
    /// This transport with `trust`'s CA file (when it names one) and its pins merged in.
    public func trusting(_ trust: TransportTrust) throws(HTTPRequestError) -> CurlTransport {
        var copy = self
        if let caFile = trust.caFile { copy.caFile = caFile }
        copy.pins = try pins.merging(trust.pins)
        return copy
    }
}
