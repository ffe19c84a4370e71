package import MooseCrypto

/// The envelope every Moose store seals its values in — the SQLite file store and the PostgreSQL
/// storage alike (their bytes are the same; only where they are kept differs):
///
/// - a value: nonce(12) ‖ AES-256-GCM ciphertext ‖ tag(16) under data key `keyID`, with
///   AAD = "moose-secret/v1" ‖ store_id ‖ u32 len ‖ namespace ‖ u32 len ‖ name ‖ u64 key_id
///   (`valueAAD`; a store may append more, as PostgreSQL appends the generation);
/// - a data key: nonce ‖ AES-256-GCM(data key) ‖ tag under the master key, with
///   AAD = "moose-data-key/v1" ‖ store_id ‖ u64 id (`wrap`, `unwrap`);
/// - the key check: HMAC-SHA-256(master key, "moose-key-check/v1" ‖ store_id), which tells a wrong
///   master key from a damaged wrapped key and reveals nothing about the key (`keyCheck`).
///
/// Integers are big-endian. Changing any byte here makes every existing store unreadable.
package enum Envelope {
    static let valueLabel = Array("moose-secret/v1".utf8)
    static let dataKeyLabel = Array("moose-data-key/v1".utf8)
    static let keyCheckLabel = Array("moose-key-check/v1".utf8)

    /// `value` as 8 big-endian bytes.
    package static func bigEndian(_ value: Int64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }

    /// 8 big-endian bytes as an integer; `nil` for any other length.
    package static func int64(bigEndian bytes: [UInt8]) -> Int64? {
        guard bytes.count == 8 else { return nil }
        return bytes.reduce(0) { $0 << 8 | Int64($1) }
    }

    /// The AAD binding a value to its store, namespace, name and data key. Built in one buffer
    /// (no temporary arrays: this runs on every store read).
    package static func valueAAD(storeID: [UInt8], namespace: String, name: String, keyID: Int64) -> [UInt8] {
        let namespaceCount = namespace.utf8.count, nameCount = name.utf8.count
        var aad: [UInt8] = []
        aad.reserveCapacity(valueLabel.count + storeID.count + 16 + namespaceCount + nameCount)
        aad.append(contentsOf: valueLabel)
        aad.append(contentsOf: storeID)
        appendBigEndian(&aad, UInt64(truncatingIfNeeded: namespaceCount), bytes: 4)
        aad.append(contentsOf: namespace.utf8)
        appendBigEndian(&aad, UInt64(truncatingIfNeeded: nameCount), bytes: 4)
        aad.append(contentsOf: name.utf8)
        appendBigEndian(&aad, UInt64(bitPattern: keyID), bytes: 8)
        return aad
    }

    /// Appends the low `bytes` bytes of `value`, most significant first.
    @inline(__always)
    static func appendBigEndian(_ buffer: inout [UInt8], _ value: UInt64, bytes: Int) {
        var shift = (bytes - 1) * 8
        while shift >= 0 {
            buffer.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
            shift -= 8
        }
    }

    /// The key check of `master` for the store `storeID`.
    package static func keyCheck(master: SecretKey, storeID: [UInt8]) throws(SealingError) -> [UInt8] {
        do {
            return try HMACAuthenticator(key: master, hash: .sha256).authenticationCode(for: keyCheckLabel + storeID)
        } catch {
            throw SealingError(.io, "key check failed", underlying: error.message)
        }
    }

    /// `true` when `check` (as stored) is `master`'s key check for the store: compared in constant time.
    package static func isKeyCheck(_ check: [UInt8], of master: SecretKey, storeID: [UInt8]) throws(SealingError)
        -> Bool
    {
        ConstantTime.equals(try keyCheck(master: master, storeID: storeID), check)
    }

    /// Data key `id`, wrapped by the master key.
    package static func wrap(_ dataKey: SecretKey, id: Int64, master: SecretKey, storeID: [UInt8]) throws(SealingError)
        -> [UInt8]
    {
        do {
            return try dataKey.withUnsafeBytes { (bytes) throws(CryptographyError) in
                try AESGCM.seal(bytes, using: master, authenticating: dataKeyLabel + storeID + bigEndian(id)).combined
            }
        } catch {
            throw SealingError(.io, "cannot wrap the data key", underlying: error.message)
        }
    }

    /// Data key `id` unwrapped by the master key. Throws `tampered` when it does not authenticate.
    package static func unwrap(_ wrapped: [UInt8], id: Int64, master: SecretKey, storeID: [UInt8]) throws(SealingError)
        -> SecretKey
    {
        do {
            let box = try AESGCM.SealedBox(combined: wrapped)
            var bytes = try AESGCM.open(box, using: master, authenticating: dataKeyLabel + storeID + bigEndian(id))
            defer { bytes.withUnsafeMutableBytes { for i in $0.indices { $0[i] = 0 } } }
            guard bytes.count == 32 else { throw SealingError(.tampered, "") }
            return SecretKey(bytes)
        } catch {
            throw SealingError(.tampered, "data key \(id) does not authenticate under the master key")
        }
    }
}
