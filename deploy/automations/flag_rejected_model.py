"""A Prefect automation that flags every rejected catdask model (an example to adapt).

The train flow emits ``catdask.model.rejected`` when it fitted a CQS / K-CQS model whose
global optimum it could not certify and therefore did not register (run state ``Rejected``).
This automation reacts to each such event by sending a notification through a Prefect
notification block, naming the model, the data set's checksum and the certificate's gap.

    export PREFECT_API_URL=http://127.0.0.1:4200/api       # catdask serve's, or your server
    # a webhook (Slack, Teams, your alerting): creates the block catdask-rejections for it
    python deploy/automations/flag_rejected_model.py --webhook https://hooks.example/T0/B0
    # or any notification block you already have (Slack, email, ...), by its block name
    python deploy/automations/flag_rejected_model.py --block-name my-slack
    # or print it as YAML for `prefect automation create --from-file` (fill in the block id)
    python deploy/automations/flag_rejected_model.py --print

Running it again replaces the automation of the same name. The automation is evaluated by
the Prefect server's triggers and actions services (on in ``prefect server start`` and
``catdask serve``). See docs/operations.md (Events, triggers and automations).
"""

from __future__ import annotations

import argparse
import sys

AUTOMATION_NAME = "catdask: flag rejected model"
BLOCK_NAME = "catdask-rejections"
EVENT = "catdask.model.rejected"  # catdask.orchestration.events.MODEL_REJECTED
SUBJECT = "catdask: model {{ event.resource['catdask.model'] }} rejected"
BODY = (
    "{{ event.resource['catdask.model'] }} was fitted on {{ event.payload.dataset }} "
    "(sha256 {{ event.payload.dataset_sha256 }}) and not registered: {{ event.payload.status }}, "
    "optimality gap <= {{ event.payload.gap }} ({{ event.payload.why_not_certified }}). "
    "Store: {{ event.resource['catdask.store'] }}."
)


def automation(block_document_id):
    """The automation: every ``catdask.model.rejected`` event sends one notification."""
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    return AutomationCore(
        name=AUTOMATION_NAME,
        description="Flag a catdask model that was fitted but not certified (not registered).",
        trigger=EventTrigger(expect={EVENT}, match={"prefect.resource.id": "catdask.model.*"},
                             posture=Posture.Reactive, threshold=1),
        actions=[SendNotification(block_document_id=block_document_id, subject=SUBJECT,
                                  body=BODY)],
    )


def webhook_block(url, name=BLOCK_NAME):
    """Save a custom-webhook notification block posting ``{"subject", "body"}`` as JSON to
    ``url``; returns its block document id."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    block = CustomWebhookNotificationBlock(
        name=name, url=url, method="POST",
        json_data={"subject": "{{subject}}", "body": "{{body}}"})
    return block.save(name, overwrite=True)


def notification_block_id(name):
    """The id of the saved notification block called ``name`` (any notification type)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        found = [b for b in client.read_block_documents() if b.name == name]
    if not found:
        raise SystemExit(f"no block named {name!r} on this Prefect server; create one in the UI "
                         "(Blocks) or pass --webhook URL")
    return found[0].id


def create(block_document_id):
    """Create (or replace) the automation on the server of ``PREFECT_API_URL``; its id."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        for old in client.read_automations_by_name(AUTOMATION_NAME):
            client.delete_automation(old.id)
        return client.create_automation(automation(block_document_id))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--webhook", metavar="URL", help="post each flag to this URL (JSON)")
    where.add_argument("--block-name", help="an existing notification block, by name")
    where.add_argument("--print", action="store_true",
                       help="print the automation as YAML instead of creating it")
    args = parser.parse_args(argv)
    if args.print:
        import uuid

        import yaml

        data = automation(uuid.UUID(int=0)).model_dump(mode="json")
        data["actions"][0]["block_document_id"] = "<your notification block's id>"
        print(yaml.safe_dump(data, sort_keys=False), end="")
        return 0
    block_id = webhook_block(args.webhook) if args.webhook else notification_block_id(
        args.block_name)
    print(f"automation {AUTOMATION_NAME!r} created: {create(block_id)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
