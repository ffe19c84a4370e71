import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MooseHTTP
import MooseOAuth
import MooseURLSession

/// A token exchange (RFC 8693, at authgent-server) and a client-credentials grant (at the test IdP)
/// through Moose's flows, against the same form POSTed bare with URLSession and its JSON read with
/// JSONSerialization — the same server, the same connection settings, interleaved rounds.
enum GrantBench {
    static func bareSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = 20
        configuration.httpMaximumConnectionsPerHost = 6
        return URLSession(configuration: configuration)
    }

    /// A bare form POST: what an app writes without a library.
    static func barePost(_ session: URLSession, _ url: URL, _ form: String, basic: String? = nil) async throws -> String
    {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let basic {
            request.setValue("Basic " + Data(basic.utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        }
        request.httpBody = Data(form.utf8)
        let (data, _) = try await session.data(for: request)
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let token = object["access_token"] as? String
        else {
            throw URLError(.badServerResponse)
        }
        return token
    }

    static func measure(
        rounds: Int = 10, perRound: Int = 10, bare: () async throws -> Void, moose: () async throws -> Void
    ) async throws -> (Double, Double) {
        for _ in 0..<10 { try await bare(); try await moose() } // warm up connections and the servers' caches
        var bareSamples: [Double] = [], mooseSamples: [Double] = []
        for _ in 0..<rounds {
            for _ in 0..<perRound {
                let t0 = DispatchTime.now().uptimeNanoseconds
                try await bare()
                bareSamples.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
            }
            for _ in 0..<perRound {
                let t0 = DispatchTime.now().uptimeNanoseconds
                try await moose()
                mooseSamples.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
            }
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        return (median(bareSamples), median(mooseSamples))
    }

    static func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        print(
            "\n## Grants through Moose against the same request made bare (ms per grant, median of 100, interleaved)\n")
        print(
            "| grant | server | bare URLSession POST + JSONSerialization | Moose flow (discovery done, `TokenSet` parsed and checked) | ratio | target |"
        )
        print("|---|---|---|---|---|---|")
        let session = bareSession()
        let transport = URLSessionTransport()
        if let authgent = environment["MOOSE_AUTHGENT_ISSUER"], let platform = environment["MOOSE_WORKLOAD_ISSUER"],
            let mintURL = URL(string: platform + "/mint?aud=\(authgent)&lifetime=3600")
        {
            let (minted, _) = try await session.data(from: mintURL)
            let subject = String(decoding: minted, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            let metadata = try await Discovery(transport: transport).metadata(for: authgent)
            let client = OAuthClient(metadata: metadata, clientID: "moose-ci", transport: transport)
            let flow = TokenExchangeFlow(client: client, audiences: ["https://api.example.test"]) {
                ExchangeToken(subject, type: ExchangeToken.idTokenType)
            }
            let tokenURL = try metadata.tokenEndpoint.unwrap()
            let form =
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&subject_token=\(subject)"
                + "&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid_token&audience=https%3A%2F%2Fapi.example.test&client_id=moose-ci"
            let (b, m) = try await measure(
                bare: { _ = try await barePost(session, tokenURL, form) },
                moose: { _ = try await flow.authorize(AuthorizationParameters(scopes: [])) })
            print(
                "| token exchange (RFC 8693) | authgent-server 0.3.4 | \(String(format: "%.2f", b / 1000)) | \(String(format: "%.2f", m / 1000)) | \(String(format: "%.2fx", m / b)) | ≤ 1.10x |"
            )
        } else {
            print(
                "| token exchange (RFC 8693) | (MOOSE_AUTHGENT_ISSUER not set: tools/authgent/start) | | | | ≤ 1.10x |")
        }
        if let issuer = environment["MOOSE_IDP_ISSUER"] {
            let metadata = try await Discovery(transport: transport).metadata(for: issuer)
            let client = OAuthClient(
                metadata: metadata, clientID: "moose-service",
                authentication: .clientSecretBasic("moose-service-secret"),
                transport: transport)
            let flow = ClientCredentialsFlow(client: client)
            let tokenURL = try metadata.tokenEndpoint.unwrap()
            let (b, m) = try await measure(
                bare: {
                    _ = try await barePost(
                        session, tokenURL, "grant_type=client_credentials",
                        basic: "moose-service:moose-service-secret")
                },
                moose: { _ = try await flow.authorize(AuthorizationParameters(scopes: [])) })
            print(
                "| client credentials | django-oauth-toolkit 3.4.1 | \(String(format: "%.2f", b / 1000)) | \(String(format: "%.2f", m / 1000)) | \(String(format: "%.2fx", m / b)) | ≤ 1.10x |"
            )
        }
    }
}

extension Optional {
    /// The value, or a benchmark set-up failure.
    func unwrap() throws -> Wrapped {
        guard let self else { throw URLError(.badURL) }
        return self
    }
}
