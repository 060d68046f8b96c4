import PushCore
import PushCrypto
import PushHTTP

/// The requests the plugins build from job and target fields (compiled in from the APNs,
/// FCM, Web Push and Proxy plugins): APNs path, headers and payload, the FCM message, the
/// Web Push headers and VAPID authorization (fuzzed token lifetime and clock), the proxy body.
/// Invariants: never a trap; no header name or value carries CR, LF or NUL (curl would send
/// a smuggled header line); every JSON body parses. Input: a delivery (see FuzzJob.swift),
/// the APNs app's settings, the VAPID lifetime's components and clock.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHeaders(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    guard let delivery = input.delivery() else { return 0 }
    let appFlags = input.byte()
    let app = APNsApp(
        bundleId: "com.example.app",
        authentication: appFlags & 1 == 0 ? .token(keyFile: "k.p8", keyId: "KEYID12345", teamId: "TEAMID1234") : .certificate(TLSOptions()),
        cancelPushType: appFlags & 2 == 0 ? .voip : .alert)
    let lifetime = Duration(secondsComponent: input.int64(), attosecondsComponent: 0)
    let clock = input.int64()

    var requests: [HTTPRequest] = []
    if let built = try? APNsRequest.build(delivery, app: app) {
        precondition(JSONValueCheck.parses(built.payload), "APNs payload is not JSON")
        requests.append(HTTPRequest(url: "https://api.push.apple.com" + built.path, headers: built.headers, body: built.payload))
    }
    let fcm = FCMMessage.body(delivery)
    precondition(JSONValueCheck.parses(fcm), "FCM message is not JSON")
    requests.append(
        HTTPRequest(
            url: "https://fcm.googleapis.com/v1/projects/p/messages:send",
            headers: [("content-type", "application/json")], body: fcm))
    let proxy = ProxyRequestBody.encode(delivery)
    precondition(JSONValueCheck.parses(proxy), "proxy body is not JSON")
    var webPushHeaders = WebPushRequest.headers(delivery)
    if let vapid = try? VAPIDTokens(key: vapidKey, subject: "mailto:ops@example.com", lifetime: lifetime, clock: { clock }),
        let authorization = try? vapid.authorization(for: "https://push.example.net")
    {
        webPushHeaders.append(("authorization", authorization))
    }
    requests.append(
        HTTPRequest(url: delivery.target.details(WebPushTarget.self)?.endpoint ?? "https://push.example.net/x", headers: webPushHeaders))

    for request in requests {
        for (name, value) in request.headers {
            for byte in Array(name.utf8) + Array(value.utf8) {
                precondition(
                    byte != 0x0D && byte != 0x0A && byte != 0, "header \(name) carries a control byte \(byte): \(value.debugDescription)")
            }
        }
    }
    return 0
}

/// One key for every input: generating a P-256 key per run would dominate the run time.
private let vapidKey = try! PrivateKey.generateP256()

private enum JSONValueCheck {
    static func parses(_ bytes: [UInt8]) -> Bool { (try? JSONParser.parse(bytes)) != nil }
}
