import Testing
@testable import PushHTTP

@Suite("Outgoing request fields: no header injection, header names are tokens (RFC 9110 §5.1, §5.5, §5.6.2)")
struct RequestFieldCheckTests {
    static let tokenPunctuation = Array("!#$%&'*+-.^_`|~".utf8)

    @Test("a request of provider-like fields passes")
    func ordinaryRequestPasses() {
        let request = HTTPRequest(
            url: "https://api.push.apple.com/3/device/0a1b2c",
            headers: [
                ("authorization", "bearer eyJhbGciOiJFUzI1NiJ9.e30.sig"), ("apns-topic", "com.example.chat"), ("apns-push-type", "alert"),
                ("x-note", "tab\tinside is allowed"), ("content-type", "application/json; charset=utf-8"),
            ])
        #expect(request.unsafeFieldDescription == nil)
    }

    @Test(
        "a header value with any control character but tab is refused, wherever it falls",
        arguments: Array(0..<0x20).filter { $0 != 0x09 } + [0x7F])
    func controlCharacterInValueIsRefused(_ byte: Int) {
        for position in ["start", "middle", "end"] {
            let control = String(UnicodeScalar(UInt8(byte)))
            let value = position == "start" ? control + "value" : position == "middle" ? "va" + control + "lue" : "value" + control
            let request = HTTPRequest(url: "https://example.com/", headers: [("apns-topic", "ok"), ("x-injected", value)])
            #expect(request.unsafeFieldDescription?.contains("x-injected") == true)
        }
    }

    @Test("a URL with a space or a control character is refused", arguments: [" ", "\r", "\n", "\t", "\u{0}", "\u{7F}"])
    func unsafeURLIsRefused(_ character: String) {
        #expect(HTTPRequest(url: "https://example.com/a\(character)b").unsafeFieldDescription != nil)
    }

    @Test("a header name is accepted exactly when it is a non-empty token: letters, digits and !#$%&'*+-.^_`|~")
    func headerNamesMustBeTokens() {
        for byte in UInt8(0)...UInt8(0x7F) {
            let isToken =
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || Self.tokenPunctuation.contains(byte)
            let name = "x-" + String(UnicodeScalar(byte)) + "-name"
            let refused = HTTPRequest(url: "https://example.com/", headers: [(name, "v")]).unsafeFieldDescription != nil
            #expect(refused == !isToken, "byte 0x\(String(byte, radix: 16))")
        }
        #expect(HTTPRequest(url: "https://example.com/", headers: [("", "v")]).unsafeFieldDescription != nil)
        #expect(HTTPRequest(url: "https://example.com/", headers: [("x-é", "v")]).unsafeFieldDescription != nil)
    }
}
