import CCurl
import CCurlShim
import Foundation
import PushCore
import Synchronization

/// HTTP/1.1 over TLS on libcurl's multi interface, for hosts that speak only HTTP/1.1: `NIOHTTP2Transport` hands it every
/// request to a host whose TLS handshake did not choose h2 (`FallbackTransport`). HTTP/2 is never negotiated here (the
/// worker's HTTP/2 client is `NIOHTTP2Transport`), so a connection carries one request at a time. One thread owns the
/// multi handle and runs every transfer; callers enqueue requests and await their responses.
public final class CurlHTTPTransport: HTTPTransport {
    private let loop: CurlMultiLoop

    /// - Parameter pinnedResolutionLifetime: how long curl keeps a request's pinned address (and any address it looked up
    ///   itself) in its DNS cache after the last transfer that used it (`CURLOPT_DNS_CACHE_TIMEOUT`, whole seconds, at least 1).
    public init(
        configuration: HTTPTransportConfiguration = HTTPTransportConfiguration(), name: String = "http",
        pinnedResolutionLifetime: Duration = .seconds(60)
    ) {
        loop = CurlMultiLoop(configuration: configuration, name: name, dnsCacheLifetime: pinnedResolutionLifetime)
    }

    public func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        if let problem = request.unsafeFieldDescription { throw .invalidRequest(problem) }
        if let refused = request.tls.refusedFile { throw .tls("\(refused)") }
        let id = loop.nextTransferID()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                loop.submit(PendingTransfer(id: id, request: request, continuation: continuation))
            }
        } onCancel: {
            loop.cancel(id)
        }
        return try result.get()
    }

    /// libcurl cannot close the connections of one identity: its connection cache knows connections by host, port and
    /// TLS settings only. The worker's requests with an identity (APNs, over HTTP/2 only) never come here; of the
    /// requests that do (HTTP/1.1-only hosts), what libcurl can do it does by itself: a connection
    /// idle for `maximumIdleTime` is not reused (`CURLOPT_MAXAGE_CONN`) and is closed when curl next prunes its cache
    /// (on a later transfer), so a removed app's connections are not used after that long; a client certificate rotated
    /// read by a new configuration version is used by new connections, while busy ones keep the old one until they go idle.
    public func closeConnections(except live: Set<ConnectionIdentity>) {}

    public func shutdown() { loop.stop() }

    /// libcurl's version line as loaded at run time, e.g. `libcurl/7.88.1 OpenSSL/3.0.17 … nghttp2/1.52.0`.
    public static var libraryVersion: String { String(cString: curl_version()) }

    /// libcurl with its version, e.g. `libcurl/7.88.1`: for reports.
    public static var library: String { String(libraryVersion.split(separator: " ").first ?? "libcurl") }

    deinit { loop.stop() }
}

struct PendingTransfer: Sendable {
    let id: UInt64
    let request: HTTPRequest
    let continuation: CheckedContinuation<Result<HTTPResponse, HTTPTransportError>, Never>
}

/// Everything libcurl writes into during one transfer; reached from C callbacks through `Unmanaged`.
final class TransferState {
    let id: UInt64
    let host: Substring
    let continuation: CheckedContinuation<Result<HTTPResponse, HTTPTransportError>, Never>
    let easy: CurlEasyHandle
    let headerList: CurlStringList
    let resolveList: CurlStringList?
    let maximumResponseBytes: Int
    var responseHeaders: [(name: String, value: String)] = []
    var responseHeaderBytes = 0
    var responseBody: [UInt8] = []
    var bodyTooLarge = false

    /// One header line as curl hands it over (status lines reset the list: a 100 may precede the answer).
    func header(_ line: UnsafeRawBufferPointer) {
        if line.starts(with: "HTTP/".utf8) {
            responseHeaders.removeAll()
            responseHeaderBytes = 0
            return
        }
        responseHeaderBytes += line.count
        guard responseHeaders.count < HTTPResponse.maximumHeaderCount, responseHeaderBytes <= HTTPResponse.maximumHeaderBytes else {
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var start = colon + 1, end = line.count
        while start < end, isSpace(line[start]) { start += 1 }
        while end > start, isSpace(line[end - 1]) { end -= 1 }
        let name = String(decoding: line[..<colon].lazy.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        responseHeaders.append((name, String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<end]), as: UTF8.self)))
    }

    init(
        pending: PendingTransfer, host: Substring, easy: CurlEasyHandle, headerList: CurlStringList, resolveList: CurlStringList?,
        maximumResponseBytes: Int
    ) {
        id = pending.id
        self.host = host
        continuation = pending.continuation
        self.easy = easy
        self.headerList = headerList
        self.resolveList = resolveList
        self.maximumResponseBytes = maximumResponseBytes
    }
}

private let curlGlobalInit: Void = {
    curl_global_init(Int(CURL_GLOBAL_ALL))
}()

/// Owns the multi handle and the thread that drives it. Hands curl at most one transfer per connection it may open
/// to a host (`maximumConnectionsPerHost`: HTTP/1.1 carries one request at a time); the rest wait here, oldest first,
/// so a request's timeout runs from when it can be sent, not while it queues behind others.
final class CurlMultiLoop: @unchecked Sendable {
    private struct Inbox {
        var pending: [PendingTransfer] = []
        var cancelled: [UInt64] = []
        var stopping = false
        var nextID: UInt64 = 0
    }

    private let multi: UnsafeMutableRawPointer
    private let configuration: HTTPTransportConfiguration
    private let inbox = Mutex(Inbox())
    private let finished = DispatchSemaphore(value: 0)
    private let stopOnce = Mutex(false)

    // Touched only by the loop thread.
    private var active: [UnsafeMutableRawPointer: TransferState] = [:]
    private var activePerHost: [Substring: Int] = [:]
    private var waiting: [Substring: FIFOQueue<PendingTransfer>] = [:]
    private var idleHandles: [CurlEasyHandle] = []
    /// Transfers curl runs at once per host: one per connection.
    private let transfersPerHost: Int

    /// Seconds curl keeps a DNS cache entry, pinned ones included.
    private let dnsCacheSeconds: Int

    init(configuration: HTTPTransportConfiguration, name: String, dnsCacheLifetime: Duration) {
        _ = curlGlobalInit
        dnsCacheSeconds = max(1, Int(dnsCacheLifetime.milliseconds / 1000))
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        self.configuration = configuration
        transfersPerHost = max(1, configuration.maximumConnectionsPerHost)
        _ = push_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, transfersPerHost)
        NamedThread.start("curl-\(name)") { [self] in run() }
    }

    deinit { curl_multi_cleanup(multi) }

    func nextTransferID() -> UInt64 {
        inbox.withLock {
            $0.nextID += 1
            return $0.nextID
        }
    }

    func submit(_ transfer: PendingTransfer) {
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.pending.append(transfer)
            return true
        }
        guard accepted else {
            transfer.continuation.resume(returning: .failure(.shutDown))
            return
        }
        curl_multi_wakeup(multi)
    }

    func cancel(_ id: UInt64) {
        inbox.withLock { $0.cancelled.append(id) }
        curl_multi_wakeup(multi)
    }

    /// Fails what is in flight with `.shutDown` and waits for the loop thread to end.
    func stop() {
        let first = stopOnce.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        inbox.withLock { $0.stopping = true }
        curl_multi_wakeup(multi)
        finished.wait()
    }

    private func run() {
        while true {
            let (pending, cancelled, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.pending.removeAll(keepingCapacity: true)
                    inbox.cancelled.removeAll()
                }
                return (inbox.pending, inbox.cancelled, inbox.stopping)
            }
            if stopping {
                let queued =
                    pending
                    + waiting.values.flatMap { queue in
                        var queue = queue
                        return queue.removeAll()
                    }
                waiting.removeAll()
                for transfer in queued { transfer.continuation.resume(returning: .failure(.shutDown)) }
                for state in Array(active.values) { complete(state, with: .failure(.shutDown)) }
                finished.signal()
                return
            }
            for transfer in pending { admit(transfer) }
            for id in cancelled { cancelTransfer(id) }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var remaining: Int32 = 0
            var completed = false
            while let message = curl_multi_info_read(multi, &remaining) {
                var handle: UnsafeMutableRawPointer?
                var code = CURLE_OK
                if push_curl_message_done(message, &handle, &code) == 1, let handle, let state = active[handle] {
                    complete(state, with: result(of: state, code: code))
                    completed = true
                }
            }
            // A finished stream frees a slot for transfers curl holds back at the stream limit;
            // curl starts them on the next perform, not on socket activity, so do not sleep first.
            if !completed { curl_multi_poll(multi, nil, 0, 1000, nil) }
        }
    }

    private func admit(_ transfer: PendingTransfer) {
        let host = Self.host(of: transfer.request.url)
        if activePerHost[host, default: 0] < transfersPerHost, waiting[host]?.isEmpty ?? true {
            start(transfer, host: host)
        } else {
            waiting[host, default: FIFOQueue()].append(transfer)
        }
    }

    private func cancelTransfer(_ id: UInt64) {
        if let state = active.values.first(where: { $0.id == id }) {
            complete(state, with: .failure(.cancelled))
            return
        }
        for host in Array(waiting.keys) {
            if let transfer = waiting[host]?.remove(where: { $0.id == id }) {
                transfer.continuation.resume(returning: .failure(.cancelled))
                return
            }
        }
    }

    /// `scheme://authority` of a URL: transfers to the same one share connections.
    static func host(of url: String) -> Substring {
        let utf8 = url.utf8
        guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")),
            utf8[colon...].starts(with: "://".utf8)
        else { return Substring(url) }
        let authority = utf8.index(colon, offsetBy: 3)
        let path = utf8[authority...].firstIndex(of: UInt8(ascii: "/")) ?? utf8.endIndex
        return url[..<path]
    }

    /// A pinned `host:port:address` as a `CURLOPT_RESOLVE` entry that expires: without the leading `+`, curl keeps the
    /// entry in the multi handle's DNS cache for good, one per host ever pinned (endpoints come from subscriptions, so
    /// hosts are unbounded). With it, the entry lives `CURLOPT_DNS_CACHE_TIMEOUT` and curl prunes stale entries when a
    /// transfer ends. Each transfer re-adds its own pin before it connects, so expiry never unpins a request.
    /// Source: libcurl's CURLOPT_RESOLVE ("[+]HOST:PORT:ADDRESS": "Entries added without the leading plus character
    /// never times out"), since 7.75.0.
    /// A pinned `host:port:address` as a `CURLOPT_CONNECT_TO` entry, `host:port:address:port` (an IPv6 address in
    /// brackets): through a proxy tunnel, curl sends `CONNECT address:port`
    /// (https://curl.se/libcurl/c/CURLOPT_CONNECT_TO.html).
    static func connectToEntry(_ pinned: String) -> String {
        var rest = Substring(pinned.hasPrefix("+") ? String(pinned.dropFirst()) : pinned)
        let host: Substring
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = rest[...close]
            rest = rest[rest.index(after: close)...].dropFirst()
        } else {
            host = rest.prefix { $0 != ":" }
            rest = rest.dropFirst(host.count + 1)
        }
        let port = rest.prefix { $0 != ":" }
        let address = rest.dropFirst(port.count + 1)
        let target = address.contains(":") && !address.hasPrefix("[") ? "[\(address)]" : String(address)
        return "\(host):\(port):\(target):\(port)"
    }

    static func expiringResolveEntry(_ pinned: String) -> String {
        pinned.hasPrefix("+") || pinned.hasPrefix("-") ? pinned : "+" + pinned
    }

    private func start(_ transfer: PendingTransfer, host: Substring) {
        activePerHost[host, default: 0] += 1
        let request = transfer.request
        let easy: CurlEasyHandle
        if let reused = idleHandles.popLast() {
            reused.reset()
            easy = reused
        } else {
            easy = CurlEasyHandle()
        }
        var lines = request.headers.map { "\($0.name): \($0.value)" }
        lines.append("Expect:")
        let proxy = configuration.egressProxy.flatMap { $0.applies(to: String(host)) ? $0 : nil }
        // A pinned request behind the proxy tunnels to its checked address (`CONNECT <address>:<port>`, TLS still for
        // its name): curl puts the connect-to host in the CONNECT line, where a resolve entry would only change what
        // curl itself looks up, and the proxy would resolve the name anew.
        let tunnelsToPinnedAddress = proxy != nil && request.pinnedResolution != nil
        let pinnedList = request.pinnedResolution.map { pinned in
            CurlStringList([tunnelsToPinnedAddress ? Self.connectToEntry(pinned) : Self.expiringResolveEntry(pinned)])
        }
        let state = TransferState(
            pending: transfer, host: host, easy: easy, headerList: CurlStringList(lines),
            resolveList: pinnedList,
            maximumResponseBytes: max(0, request.maximumResponseBytes ?? configuration.maximumResponseBytes))
        let context = Unmanaged.passUnretained(state).toOpaque()

        easy.set(CURLOPT_URL, request.url)
        easy.set(CURLOPT_NOSIGNAL, 1)
        // The egress proxy as the worker read it (HTTPS_PROXY, NO_PROXY), never one libcurl would read from the environment
        // itself.
        if let proxy {
            easy.set(CURLOPT_PROXY, proxy.curlProxyURL)
            easy.set(CURLOPT_HTTPPROXYTUNNEL, 1)
            if let user = proxy.user {
                easy.set(CURLOPT_PROXYUSERNAME, user)
                easy.set(CURLOPT_PROXYPASSWORD, proxy.password ?? "")
            }
        } else {
            easy.set(CURLOPT_PROXY, "")
        }
        easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        easy.set(CURLOPT_TIMEOUT_MS, Int(request.timeout.milliseconds))
        easy.set(CURLOPT_CONNECTTIMEOUT_MS, Int(min(request.timeout, configuration.connectTimeout).milliseconds))
        easy.set(CURLOPT_PROTOCOLS_STR, "https")
        // The bytes the options carry (copied by curl), never the paths: what a path holds now was not checked.
        if let caFile = request.tls.caFile { easy.set(CURLOPT_CAINFO_BLOB, blob: caFile) }
        if let certificate = request.tls.clientCertificateFile {
            easy.set(CURLOPT_SSLCERT_BLOB, blob: certificate)
            easy.set(CURLOPT_SSLCERTTYPE, request.tls.clientCertificateFormat.rawValue)
            if request.tls.clientCertificateFormat == .pem {
                easy.set(CURLOPT_SSLKEY_BLOB, blob: request.tls.clientKeyFile ?? certificate)
                easy.set(CURLOPT_SSLKEYTYPE, "PEM")
            }
        }
        if let password = request.tls.clientKeyPassword { easy.set(CURLOPT_KEYPASSWD, password) }
        easy.set(CURLOPT_TCP_KEEPALIVE, 1)
        easy.set(CURLOPT_MAXAGE_CONN, max(1, Int(configuration.maximumIdleTime.milliseconds / 1000)))
        easy.set(CURLOPT_HTTPHEADER, list: state.headerList)
        if let pinnedList = state.resolveList { easy.set(tunnelsToPinnedAddress ? CURLOPT_CONNECT_TO : CURLOPT_RESOLVE, list: pinnedList) }
        easy.set(CURLOPT_DNS_CACHE_TIMEOUT, dnsCacheSeconds)
        switch request.method {
        case "GET":
            easy.set(CURLOPT_HTTPGET, 1)
        default:
            easy.set(CURLOPT_POSTFIELDSIZE, request.body.count)
            request.body.withUnsafeBytes { buffer in
                let empty: [UInt8] = [0]
                if buffer.count == 0 {
                    empty.withUnsafeBytes { easy.set(CURLOPT_COPYPOSTFIELDS, pointer: UnsafeMutableRawPointer(mutating: $0.baseAddress)) }
                } else {
                    easy.set(CURLOPT_COPYPOSTFIELDS, pointer: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
                }
            }
            if request.method != "POST" { easy.set(CURLOPT_CUSTOMREQUEST, request.method) }
        }
        easy.set(
            CURLOPT_WRITEFUNCTION,
            callback: { data, size, count, context in
                let state = Unmanaged<TransferState>.fromOpaque(context!).takeUnretainedValue()
                let length = size * count
                guard state.responseBody.count + length <= state.maximumResponseBytes else {
                    let room = state.maximumResponseBytes - state.responseBody.count
                    if let data, room > 0 { state.responseBody.append(contentsOf: UnsafeRawBufferPointer(start: data, count: room)) }
                    state.bodyTooLarge = true
                    return 0
                }
                if let data { state.responseBody.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length)) }
                return length
            })
        easy.set(CURLOPT_WRITEDATA, pointer: context)
        easy.set(
            CURLOPT_HEADERFUNCTION,
            callback: { data, size, count, context in
                let state = Unmanaged<TransferState>.fromOpaque(context!).takeUnretainedValue()
                let length = size * count
                guard let data else { return length }
                state.header(UnsafeRawBufferPointer(start: data, count: length))
                return length
            })
        easy.set(CURLOPT_HEADERDATA, pointer: context)

        active[easy.pointer] = state
        curl_multi_add_handle(multi, easy.pointer)
    }

    private func result(of state: TransferState, code: CURLcode) -> Result<HTTPResponse, HTTPTransportError> {
        let status = state.easy.responseCode
        let response = HTTPResponse(
            status: status, headers: state.responseHeaders, body: state.responseBody,
            bodyTruncated: state.bodyTooLarge)
        switch code {
        case CURLE_OK:
            return .success(response)
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(.timedOut)
        case CURLE_WRITE_ERROR where state.bodyTooLarge && status != 0:
            // The answer's status and headers arrived; the rest of an oversized body is not read.
            return .success(response)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING:
            return .failure(.connectionFailed(describe(code)))
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE,
            CURLE_SSL_CIPHER, CURLE_SSL_ENGINE_NOTFOUND:
            return .failure(.tls(describe(code)))
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .failure(.invalidRequest(describe(code)))
        default:
            return .failure(.protocolError(describe(code)))
        }
    }

    private func describe(_ code: CURLcode) -> String {
        "\(String(cString: curl_easy_strerror(code))) (curl \(code.rawValue))"
    }

    private func complete(_ state: TransferState, with result: Result<HTTPResponse, HTTPTransportError>) {
        curl_multi_remove_handle(multi, state.easy.pointer)
        active[state.easy.pointer] = nil
        if idleHandles.count < 256 { idleHandles.append(state.easy) }
        state.continuation.resume(returning: result)
        let host = state.host
        activePerHost[host, default: 1] -= 1
        if activePerHost[host, default: 0] < transfersPerHost, let next = waiting[host]?.popFirst() {
            start(next, host: host)
        }
        if waiting[host]?.isEmpty == true { waiting[host] = nil }
        if activePerHost[host] == 0 { activePerHost[host] = nil }
    }
}
