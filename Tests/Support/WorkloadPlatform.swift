import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// authgent-server (RFC 8693, RFC 7523) and the stand-in CI platform beside it (tools/workload/issuer.py,
/// started by tools/authgent/start): the workload tests' provider and identity tokens.
public enum WorkloadPlatform {
    /// authgent's issuer.
    public static let issuer = ProcessInfo.processInfo.environment["MOOSE_AUTHGENT_ISSUER"] ?? "http://127.0.0.1:8782"
    /// The stand-in CI platform's issuer.
    public static let platform = ProcessInfo.processInfo.environment["MOOSE_WORKLOAD_ISSUER"] ?? "http://127.0.0.1:8781"
    /// The API the exchanged tokens are for.
    public static let audience = "https://api.example.test"

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// A token the stand-in platform signs for `audience` (as a kubelet projects one into a pod).
    public static func mint(audience: String = issuer, lifetime: Int = 300) async throws -> String {
        var components = URLComponents(string: platform + "/mint")
        components?.queryItems = [
            URLQueryItem(name: "aud", value: audience), URLQueryItem(name: "lifetime", value: String(lifetime)),
            URLQueryItem(name: "sub", value: "system:serviceaccount:ci:deployer")
        ]
        guard let url = components?.url else { throw Unavailable(description: "no URL for \(platform)") }
        let (data, response) = try await URLSession.shared.data(from: url)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw Unavailable(
                description: "the stand-in CI issuer at \(platform) is not running (tools/authgent/start)")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
