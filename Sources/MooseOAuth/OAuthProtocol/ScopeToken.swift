/// RFC 6749 §3.3 `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`, at most 256 bytes here.
package enum ScopeToken {
    package static func isValid(_ scope: String) -> Bool {
        !scope.isEmpty && scope.utf8.count <= 256
            && scope.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    /// `a` followed by every scope of `b` that `a` lacks (byte-for-byte comparison), order kept.
    package static func union(_ a: [String], _ b: [String]) -> [String] {
        var result = a
        for scope in b where !result.contains(where: { $0.utf8.elementsEqual(scope.utf8) }) { result.append(scope) }
        return result
    }

    /// `true` when every scope of `needed` is in `granted` (byte for byte).
    package static func covers(_ granted: [String], _ needed: [String]) -> Bool {
        needed.allSatisfy { scope in granted.contains { $0.utf8.elementsEqual(scope.utf8) } }
    }
}
