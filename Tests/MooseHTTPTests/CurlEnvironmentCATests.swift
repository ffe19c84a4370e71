import MooseHTTP
import Testing

/// The CA file a `CurlTransport` given none trusts: the environment's, as curl's, OpenSSL's, Python's
/// and Go's tools do (the `moose` CLI's `$SSL_CERT_FILE` test, TLSCLITests, runs it against a real TLS server).
struct CurlEnvironmentCATests {
    @Test func sslCertFileFirstThenCurlCABundleAndEmptyIsNone() {
        func file(_ variables: [String: String]) -> String? { CurlTransport.environmentCAFile { variables[$0] } }
        #expect(file([:]) == nil)
        #expect(file(["SSL_CERT_FILE": "/a.pem", "CURL_CA_BUNDLE": "/b.pem"]) == "/a.pem")
        #expect(file(["CURL_CA_BUNDLE": "/b.pem"]) == "/b.pem")
        #expect(file(["SSL_CERT_FILE": "", "CURL_CA_BUNDLE": "/b.pem"]) == "/b.pem")
        #expect(file(["SSL_CERT_FILE": "", "CURL_CA_BUNDLE": ""]) == nil)
    }
}
