/// The VAPID `sub` claim: a contact for the push service. RFC 8292 §2.1: "a "mailto:" (email) [RFC6068] or an
/// "https:" [RFC2818] URI". Apple's push service (`web.push.apple.com`) is stricter than FCM and Mozilla: it answers
/// `403 BadJwtToken` to every push signed with a subject whose host is not a real one (Apple, "Sending web push
/// notifications in web apps and browsers": "The JWT subject claim isn't a URL or mailto:"; observed for
/// `mailto:…@localhost` in web-push-libs/web-push#947 and pywebpush#175, for `.local` and `.invalid` hosts in
/// 0cv/herdr-mobile-relay#7 and alphastorm/omp-session-gateway#173). A subject Apple refuses would fail every Safari
/// subscription, so configuration refuses it at start-up.
enum VAPIDSubject {
    /// Host names that never resolve publicly: `localhost` (RFC 6761 §6.3) and the special-use suffixes
    /// `.localhost`, `.invalid`, `.test` (RFC 2606, RFC 6761) and `.local` (RFC 6762).
    static let privateSuffixes = [".localhost", ".invalid", ".test", ".local"]

    /// Why a push service would refuse `subject`, nil when it is a usable contact.
    static func problem(_ subject: String) -> String? {
        let host: Substring
        if subject.hasPrefix("mailto:") {
            let address = subject.dropFirst("mailto:".count)
            guard let at = address.lastIndex(of: "@"), at != address.startIndex else {
                return "a mailto: subject needs an address with @ and a domain"
            }
            host = address[address.index(after: at)...].prefix { $0 != "?" && $0 != ">" }
        } else if subject.hasPrefix("https://") {
            let authority = subject.dropFirst("https://".count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            host = authority.split(separator: "@").last?.prefix { $0 != ":" } ?? ""
        } else {
            return "it must be a mailto: or https: URI (RFC 8292 §2.1)"
        }
        let name = host.lowercased().trimmingCharacters(in: ["."])
        guard !name.isEmpty else { return "it names no host" }
        if name == "localhost" || privateSuffixes.contains(where: { name.hasSuffix($0) }) {
            return "\(name) is not a public host: Apple's push service answers 403 BadJwtToken to every push (web-push-libs/web-push#947)"
        }
        return nil
    }
}
