import Mustache
import PushCore

/// One compiled template file: Mustache with JSON-string escaping, checked to render
/// JSON of its provider's shape.
struct PayloadTemplate: Sendable {
    let template: MustacheTemplate
    let shape: any TemplateShape
    /// Path relative to the templates directory, e.g. `apns/com.example.chat/call.mustache`.
    let source: String

    /// Constructs that would print a value without escaping, or pull in other files.
    static let forbidden: [(token: String, why: String)] = [
        ("{{{", "triple mustaches print a value unescaped; use {{KEYWORD}}"),
        ("{{&", "{{& …}} prints a value unescaped; use {{KEYWORD}}"),
        ("{{=", "changing the delimiters is not supported"),
        ("{{>", "partials are not supported"),
        ("{{%", "pragmas are set by push-worker"),
    ]

    /// Compiles `text` and renders it once with a sample delivery whose values contain
    /// quotes, backslashes and newlines: a template that cannot produce valid JSON of
    /// the provider's shape is refused with the reason.
    init(text: String, shape: any TemplateShape, app: String, kind: JobKind, source: String) throws(PayloadTemplateFailure) {
        self.shape = shape
        self.source = source
        if let construct = Self.forbidden.first(where: { text.contains($0.token) }) {
            throw PayloadTemplateFailure(source: source, message: construct.why)
        }
        _ = JSONStringContentType.registered
        do {
            template = try MustacheTemplate(string: JSONStringContentType.pragma + text)
        } catch {
            throw PayloadTemplateFailure(source: source, message: "not a valid Mustache template: \(error)")
        }
        let sample = SampleDelivery.make(target: shape.sampleTarget(app: app), kind: kind)
        if case .failure(let failure) = render(PayloadKeywords(delivery: sample, app: app)) { throw failure }
    }

    func render(_ keywords: PayloadKeywords) -> Result<RenderedPayload, PayloadTemplateFailure> {
        var context: [String: Any] = keywords.values
        context["data"] = keywords.data
        let output = template.render(context)
        let document: JSONValue
        do {
            document = try JSONParser.parse(Array(output.utf8))
        } catch {
            return .failure(PayloadTemplateFailure(source: source, message: "rendered output is not valid JSON: \(error.description)"))
        }
        if let problem = shape.problem(in: document) {
            return .failure(PayloadTemplateFailure(source: source, message: problem))
        }
        return .success(RenderedPayload(document: document, source: source))
    }
}

/// The delivery templates are checked with at start-up and on reload: every keyword set,
/// with text that breaks naive substitution.
enum SampleDelivery {
    static func make(target: Target, kind: JobKind) -> Delivery {
        let hostile = #"Q "quoted" \back\slash"#
        let job = Job(
            id: "template-check", createdAt: 1_795_310_000_000, ttl: 30, kind: kind, priority: .high,
            userId: "callee \"2222\"", collapseKey: "collapse\"key", dedupeKey: nil,
            notification: Notification(title: "Title \(hostile)", body: "Body\nline 2 \(hostile)", sound: "ring\".wav", badge: 3),
            data: [
                "callId": "call\"id", "caller": "Caller \(hostile)", "callerUsername": "1111\"",
                "callerDisplayName": #"Display "},"x":""#, "msg": "msg \(hostile)",
            ],
            targets: [])
        return Delivery(job: job, target: target, attempt: 1, now: 1_795_310_000_000)
    }
}
