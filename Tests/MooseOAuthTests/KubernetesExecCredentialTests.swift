import Foundation
import MooseOAuthSystem
import Testing

/// client-go's exec credential plugin protocol: `KUBERNETES_EXEC_INFO` read, `ExecCredential` written.
@Suite struct KubernetesExecCredentialTests {
    /// What kubectl 1.30 sets (the client-go documentation's example, cluster omitted).
    static let kubectlInfo =
        #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":true}}"#

    @Test func theExecInfoSaysTheVersionAndWhetherInteractive() throws {
        let info = try KubernetesExecCredential.ExecInfo(parsing: Self.kubectlInfo)
        #expect(info.apiVersion == .v1beta1 && info.interactive == true)
        let bare = try KubernetesExecCredential.ExecInfo(parsing: #"{"apiVersion":7}"#)
        #expect(bare.apiVersion == nil && bare.interactive == nil)
        #expect(
            helperErrorCode {
                try KubernetesExecCredential.ExecInfo(parsing: #"{"apiVersion":"client.authentication.k8s.io/v9"}"#)
            } == CredentialHelperError.unsupportedVersion)
        for bad in ["", "[]", "{", String(repeating: " ", count: 70_000) + "{}"] {
            #expect(
                helperErrorCode { try KubernetesExecCredential.ExecInfo(parsing: bad) }
                    == CredentialHelperError.malformedInput)
        }
    }

    /// With `provideClusterInfo`, kubectl embeds the kubeconfig's free-form `spec.cluster.config`: a
    /// deeply nested extension is still read (the JSON parser's own depth bound, 32).
    @Test func aDeepClusterConfigIsRead() throws {
        let config = String(repeating: #"{"a":"#, count: 24) + "1" + String(repeating: "}", count: 24)
        let info = try KubernetesExecCredential.ExecInfo(
            parsing: #"{"apiVersion":"client.authentication.k8s.io/v1","spec":{"cluster":{"config":"#
                + config + "}}}")
        #expect(info.apiVersion == .v1)
    }

    @Test func theDocumentIsInTheAskedVersion() throws {
        let expiry = Date(timeIntervalSince1970: 1_800_000_000)
        let info = try KubernetesExecCredential.ExecInfo(parsing: Self.kubectlInfo)
        let answer = KubernetesExecCredential(token: "tok", expiresAt: expiry, answering: info)
        #expect(
            answer.serialized()
                == #"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"tok","expirationTimestamp":"2027-01-15T08:00:00Z"}}"#
        )
        let plain = KubernetesExecCredential(token: "tok", expiresAt: nil, answering: .init())
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(plain.serialized().utf8)) as? [String: Any])
        #expect(object["apiVersion"] as? String == "client.authentication.k8s.io/v1")
        #expect((object["status"] as? [String: String]) == ["token": "tok"])
        let secret = KubernetesExecCredential(token: "sEcReT-7f3a", expiresAt: nil, answering: .init())
        #expect(!"\(secret)".contains("sEcReT-7f3a") && "\(secret)".contains("token redacted"))
        #expect(!String(reflecting: secret).contains("sEcReT-7f3a"))
    }
}
