#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Calls `body` with the bytes of any `ContiguousBytes` value (`[UInt8]`, `Data`, a buffer pointer…).
@inline(__always)
func withBytes<R, E: Error>(
    _ bytes: some ContiguousBytes,
    _ body: (UnsafeRawBufferPointer) throws(E) -> R
) throws(E) -> R {
    // ContiguousBytes.withUnsafeBytes is rethrows-untyped; funnel the typed error through a Result.
    let result: Result<R, E> = bytes.withUnsafeBytes { buffer in
        do throws(E) { return .success(try body(buffer)) } catch { return .failure(error) }
    }
    return try result.get()
}

/// Runs `body`, whose only errors are `CryptographyError`s thrown through an untyped-`rethrows` standard
/// library closure (such as `Array.withUnsafeMutableBufferPointer`), and restores the typed error.
@inline(__always)
func typed<R>(_ body: () throws -> R) throws(CryptographyError) -> R {
    do {
        return try body()
    } catch let error as CryptographyError {
        throw error
    } catch {
        throw CryptographyError(CryptographyError.libraryFailure, "unexpected error: \(error)")
    }
}

/// A C string for an OSSL_PARAM name. libcrypto stores the name pointer (it does not copy it), so
/// it must outlive the parameter list: a `StaticString`'s storage lives as long as the program.
@inline(__always)
func cName(_ name: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// An `UnsafePointer<UInt8>` for a buffer, never nil (libcrypto rejects NULL even for zero lengths
/// in a few places).
@inline(__always)
func base(_ buffer: UnsafeRawBufferPointer) -> UnsafePointer<UInt8> {
    if let address = buffer.baseAddress {
        return address.assumingMemoryBound(to: UInt8.self)
    }
    return emptyBytePointer
}

/// A valid byte nobody writes: the terminating NUL of an empty static string, in read-only memory.
private var emptyBytePointer: UnsafePointer<UInt8> { ("" as StaticString).utf8Start }

/// A byte buffer that is zeroed when released: the storage for key material.
///
/// Copies share storage (it is a class underneath); the bytes are wiped with `cleanse` (`OPENSSL_cleanse`, or `explicit_bzero` on swift-crypto)
/// when the last copy goes away.
final class SecureBytes: Sendable {
    // Immutable after init: safe to share between threads.
    let count: Int
    private let handle: SharedHandle<UnsafeMutableRawBufferPointer>
    private var storage: UnsafeMutableRawBufferPointer { handle.pointer }

    init(_ bytes: some ContiguousBytes) {
        let buffer = bytes.withUnsafeBytes { source in
            let target = UnsafeMutableRawBufferPointer.allocate(byteCount: max(source.count, 1), alignment: 16)
            if source.count > 0 { target.copyMemory(from: source) }
            return (target, source.count)
        }
        handle = SharedHandle(buffer.0)
        count = buffer.1
    }

    init(randomCount: Int) throws(CryptographyError) {
        handle = SharedHandle(UnsafeMutableRawBufferPointer.allocate(byteCount: max(randomCount, 1), alignment: 16))
        count = randomCount
        try SecureRandom.fill(UnsafeMutableRawBufferPointer(rebasing: storage[0..<randomCount]))
    }

    deinit {
        cleanse(storage)
        storage.deallocate()
    }

    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }
}

/// Constant-time comparison, for MACs, `state` values and anything else an attacker may probe.
public enum ConstantTime {
    /// `true` when both byte strings are equal, in time that depends only on their lengths.
    ///
    /// ```swift
    /// guard ConstantTime.equals(Array(receivedState.utf8), Array(expectedState.utf8)) else { throw … }
    /// ```
    public static func equals(_ lhs: some ContiguousBytes, _ rhs: some ContiguousBytes) -> Bool {
        lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in
                guard a.count == b.count else { return false }
                return constantTimeEquals(a, b)
            }
        }
    }
}

/// A pointer to memory or a libcrypto object that nobody modifies once it is made (a fetched
/// algorithm, a keyed MAC template, key bytes): libcrypto lets any number of threads read such an
/// object at once, so the pointer may be shared. Never for a context an operation updates.
// unchecked: a pointer is never Sendable; this one's target is immutable after init (the rule above)
struct SharedHandle<Pointer>: @unchecked Sendable {
    let pointer: Pointer
    init(_ pointer: Pointer) { self.pointer = pointer }
}
