import CCurl
import CCurlShim

/// Owns one libcurl easy handle. Used only on the transport's loop thread.
final class CurlEasyHandle {
    let pointer: UnsafeMutableRawPointer

    init() {
        guard let handle = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        pointer = handle
    }

    deinit { curl_easy_cleanup(pointer) }

    func reset() { curl_easy_reset(pointer) }

    func set(_ option: CURLoption, _ value: Int) { _ = push_curl_easy_setopt_long(pointer, option, value) }
    func set(_ option: CURLoption, _ value: String) { _ = value.withCString { push_curl_easy_setopt_string(pointer, option, $0) } }
    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) { _ = push_curl_easy_setopt_pointer(pointer, option, value) }
    /// A `CURLOPT_*_BLOB` option: curl copies the bytes (`CURL_BLOB_COPY`), so they need not outlive the call.
    func set(_ option: CURLoption, blob file: CredentialFile) {
        var bytes = (try? file.bytes()) ?? []
        bytes.withUnsafeMutableBytes { buffer in
            var blob = curl_blob(data: buffer.baseAddress, len: buffer.count, flags: UInt32(CURL_BLOB_COPY))
            _ = withUnsafeMutablePointer(to: &blob) { push_curl_easy_setopt_pointer(pointer, option, $0) }
        }
    }
    func set(_ option: CURLoption, list: CurlStringList) { _ = push_curl_easy_setopt_slist(pointer, option, list.head) }
    func set(_ option: CURLoption, callback: push_curl_data_callback) { _ = push_curl_easy_setopt_data_callback(pointer, option, callback) }

    var responseCode: Int {
        var code = 0
        _ = push_curl_easy_getinfo_long(pointer, CURLINFO_RESPONSE_CODE, &code)
        return code
    }
}

/// Owns a `curl_slist` of request headers for the lifetime of one transfer.
final class CurlStringList {
    private(set) var head: UnsafeMutablePointer<curl_slist>?

    init(_ lines: [String]) {
        for line in lines { head = curl_slist_append(head, line) }
    }

    deinit { curl_slist_free_all(head) }
}
