#!/usr/bin/env bash
# Deploys template.yaml (the glue-sync function, its queue, rule and alarms) to LocalStack
# with samlocal, on a local data bucket and Glue database, then says how to write a Delta
# commit and watch its Iceberg mirror appear in Glue. Run with --help for the options.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: localstack/deploy-samlocal.sh [--bucket NAME] [--database NAME] [--stack-name NAME]

Deploys template.yaml to a running LocalStack (its auth token must include Glue, a paid feature):
  1. creates the data bucket if missing and turns on its EventBridge notifications
     (merged into the bucket's existing notification configuration, not replacing it);
  2. creates the Glue database if missing;
  3. samlocal build (cargo lambda, release build of glue-sync: several minutes cold);
  4. samlocal deploy --resolve-s3 with DataBucket, GlueDatabase, CreateGlueDatabase=false
     and the Architecture of this machine;
  5. sets AWS_ALLOW_HTTP=true on the function, because LocalStack's endpoint is plain http;
  6. prints how to write a Delta commit and watch the Glue table appear.

Options:
  --bucket NAME       data bucket (default: lakemirror-demo)
  --database NAME     Glue database (default: lakemirror_demo)
  --stack-name NAME   CloudFormation stack (default: lakemirror)
  -h, --help          this help

Needs:
  samlocal             pip install aws-sam-cli-local  (wraps the SAM CLI: pip install aws-sam-cli)
  awslocal             pip install awscli-local       (wraps the AWS CLI)
  cargo lambda         pip install cargo-lambda, or see https://www.cargo-lambda.info
  LOCALSTACK_AUTH_TOKEN  LocalStack auth token (Glue needs a paid plan), and LocalStack running:
                       docker compose -f localstack/docker-compose.yml up -d --wait
Environment: LOCALSTACK_ENDPOINT (default http://localhost:4566), AWS_DEFAULT_REGION
(default us-east-1).
EOF
}

bucket=lakemirror-demo
database=lakemirror_demo
stack=lakemirror
while [ $# -gt 0 ]; do
  case "$1" in
    --bucket) bucket="${2:?--bucket needs a value}"; shift 2 ;;
    --database) database="${2:?--database needs a value}"; shift 2 ;;
    --stack-name) stack="${2:?--stack-name needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "deploy-samlocal: $*" >&2; exit 1; }
step() { echo "==> $*" >&2; }

cd "$(dirname "$0")/.."
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
endpoint="${LOCALSTACK_ENDPOINT:-http://localhost:4566}"

command -v samlocal >/dev/null || die "samlocal not found: pip install aws-sam-cli-local aws-sam-cli"
command -v awslocal >/dev/null || die "awslocal not found: pip install awscli-local awscli"
command -v python3 >/dev/null || die "python3 not found"
cargo lambda --version >/dev/null 2>&1 || die "cargo lambda not found (samlocal build needs it): pip install cargo-lambda"
[ -n "${LOCALSTACK_AUTH_TOKEN:-}" ] || die "LOCALSTACK_AUTH_TOKEN is not set: LocalStack images need a token and Glue a paid plan (token from https://app.localstack.cloud)"

health="$(curl -fsS "$endpoint/_localstack/health" 2>/dev/null)" ||
  die "no LocalStack at $endpoint; start it: docker compose -f localstack/docker-compose.yml up -d --wait"
python3 - "$health" <<'EOF' || die "LocalStack at $endpoint does not offer every service the stack needs (is the auth token valid?)"
import json, sys
services = json.loads(sys.argv[1]).get("services", {})
missing = [s for s in ("s3", "sqs", "events", "glue", "lambda", "iam", "cloudformation", "logs", "sts", "cloudwatch")
           if services.get(s) not in ("available", "running")]
if missing:
    print("not available: " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
EOF

case "$(uname -m)" in
  x86_64|amd64) architecture=x86_64 ;;
  aarch64|arm64) architecture=arm64 ;;
  *) die "unsupported machine $(uname -m): LocalStack runs Lambda for x86_64 or arm64" ;;
esac

step "bucket s3://$bucket with EventBridge notifications"
awslocal s3api head-bucket --bucket "$bucket" >/dev/null 2>&1 || awslocal s3 mb "s3://$bucket" >/dev/null
# put-bucket-notification-configuration replaces the whole configuration: read, add, write.
current="$(awslocal s3api get-bucket-notification-configuration --bucket "$bucket" --output json)"
merged="$(python3 - "$current" <<'EOF'
import json, sys
config = json.loads(sys.argv[1] or "{}")
config.pop("ResponseMetadata", None)
config["EventBridgeConfiguration"] = {}
print(json.dumps(config))
EOF
)"
awslocal s3api put-bucket-notification-configuration --bucket "$bucket" --notification-configuration "$merged"

step "Glue database $database"
awslocal glue get-database --name "$database" >/dev/null 2>&1 ||
  awslocal glue create-database --database-input "{\"Name\": \"$database\"}"

step "samlocal build (release build of glue-sync for $architecture)"
samlocal build --template template.yaml --parameter-overrides "Architecture=$architecture"

step "samlocal deploy --stack-name $stack"
samlocal deploy \
  --stack-name "$stack" \
  --region "$AWS_DEFAULT_REGION" \
  --resolve-s3 \
  --no-confirm-changeset \
  --no-fail-on-empty-changeset \
  --capabilities CAPABILITY_IAM \
  --parameter-overrides "DataBucket=$bucket" "GlueDatabase=$database" CreateGlueDatabase=false "Architecture=$architecture"

output() {
  awslocal cloudformation describe-stacks --stack-name "$stack" \
    --query "Stacks[0].Outputs[?OutputKey=='$1'].OutputValue" --output text
}
function_arn="$(output GlueSyncFunctionArn)"
function_name="${function_arn##*:}"
queue_url="$(output SyncQueueUrl)"
dead_letter_url="$(output SyncDeadLetterQueueUrl)"
rule_name="$(output SyncRuleName)"

# LocalStack points the function's AWS SDKs at its http endpoint (AWS_ENDPOINT_URL); the
# S3 client refuses plain http unless AWS_ALLOW_HTTP=true. Added beside the stack's
# variables (update-function-configuration replaces the whole environment).
step "AWS_ALLOW_HTTP=true on $function_name"
environment="$(awslocal lambda get-function-configuration --function-name "$function_arn" --query Environment --output json)"
environment="$(python3 - "$environment" <<'EOF'
import json, sys
env = json.loads(sys.argv[1]) or {}
env.setdefault("Variables", {})["AWS_ALLOW_HTTP"] = "true"
print(json.dumps({"Variables": env["Variables"]}))
EOF
)"
awslocal lambda update-function-configuration --function-name "$function_arn" --environment "$environment" >/dev/null
awslocal lambda wait function-updated --function-name "$function_arn"

cat <<EOF

Deployed stack $stack: function $function_name, queue $queue_url,
dead-letter queue $dead_letter_url, rule $rule_name.

Write a Delta commit with delta-rs (the test rig's venv has deltalake):

  "\$(tests/rig/venv.sh)/bin/python" - <<'PY'
  import pandas as pd
  from deltalake import write_deltalake
  opts = {"AWS_ENDPOINT_URL": "$endpoint", "AWS_ALLOW_HTTP": "true", "AWS_REGION": "$AWS_DEFAULT_REGION",
          "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
  write_deltalake("s3://$bucket/warehouse/orders", pd.DataFrame({"id": [1, 2], "amount": [9.5, 12.0]}),
                  mode="append", storage_options=opts)
  PY

A few seconds later (EventBridge, SQS, the batching window) the function has logged the
sync and the Iceberg table is in Glue:

  awslocal logs filter-log-events --log-group-name /aws/lambda/$stack-glue-sync --query 'events[].message'
  awslocal glue get-table --database-name $database --name orders \\
    --query 'Table.Parameters.{table_type: table_type, metadata_location: metadata_location}'

Each further write_deltalake(...) adds one Iceberg snapshot. Events that failed for good
wait in the dead-letter queue, with the reason in the lakemirror-error attribute:

  awslocal sqs receive-message --queue-url $dead_letter_url --message-attribute-names All

Remove the stack: samlocal delete --stack-name $stack --no-prompts
EOF
