import PushCore
import Testing

@Suite("Percent-encoding (RFC 3986)")
struct PercentEncodingTests {
    @Test("unreserved characters pass unchanged")
    func unreservedPassUnchanged() {
        let unreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
        #expect(PercentEncoding.allButUnreserved(unreserved) == unreserved)
    }

    @Test("every other byte is %XX with upper-case hex, non-ASCII letters byte by byte of their UTF-8")
    func everyOtherByteIsEncoded() {
        #expect(PercentEncoding.allButUnreserved("a b&c=d+e/f%") == "a%20b%26c%3Dd%2Be%2Ff%25")
        #expect(PercentEncoding.allButUnreserved("é") == "%C3%A9")
        #expect(PercentEncoding.allButUnreserved("\u{0}\u{7F}") == "%00%7F")
        #expect(PercentEncoding.allButUnreserved("") == "")
    }
}
