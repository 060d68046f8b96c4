import PushCore
import Testing

@testable import PushHTTP

@Suite("A request is a value, though its fields share one box between copies")
struct HTTPRequestValueTests {
    static func original() -> HTTPRequest {
        HTTPRequest(
            url: "https://api.push.apple.com/3/device/0a1b2c", headers: [("apns-topic", "com.example.chat")], body: Array("{}".utf8),
            timeout: .seconds(10), lane: .normal, maximumResponseBytes: 4096)
    }

    @Test("a copy keeps every field when the original is changed, and the original keeps them when the copy is")
    func copiesAreIndependent() {
        var request = Self.original()
        let copy = request
        request.headers.append(("authorization", "bearer token"))
        request.body.append(contentsOf: Array("x".utf8))
        request.url = "https://api.sandbox.push.apple.com/3/device/0a1b2c"
        request.method = "PUT"
        request.timeout = .seconds(3)
        request.lane = .urgent
        request.maximumResponseBytes = nil
        request.pinnedResolution = "api.push.apple.com:443:127.0.0.1"
        request.resolvedByProxy = true
        request.connectionIdentity = ConnectionIdentity("TEAM/KEY")

        #expect(copy.headers.map(\.name) == ["apns-topic"])
        #expect(copy.body == Array("{}".utf8))
        #expect(copy.url == "https://api.push.apple.com/3/device/0a1b2c")
        #expect(copy.method == "POST")
        #expect(copy.timeout == .seconds(10))
        #expect(copy.lane == .normal)
        #expect(copy.maximumResponseBytes == 4096)
        #expect(copy.pinnedResolution == nil)
        #expect(copy.resolvedByProxy == false)
        #expect(copy.connectionIdentity == nil)

        var second = copy
        second.headers[0].value = "com.example.other"
        #expect(copy.headers[0].value == "com.example.chat")
        #expect(request.headers.map(\.name) == ["apns-topic", "authorization"])
        #expect(request.method == "PUT" && request.lane == .urgent && request.resolvedByProxy)
    }
}
