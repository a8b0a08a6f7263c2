"""The campaign runner: one folder, one store, every stage of the judging protocol sequenced
(docs/campaign.md). A room above pooler/, dedupe/, cal/, labels/, evaluate/ and reuse/: it only
calls their public functions and keeps the state.

>>> from qrelkit.campaign import Campaign, STAGES
>>> STAGES[:4]
('validate', 'select', 'dedupe', 'pool')
"""

from qrelkit.campaign.runner import REQUIRED, STAGES, STATUS_COLUMNS, Campaign, Runner, status_table
from qrelkit.campaign.store import CAMPAIGN_SCHEMA_VERSION, CampaignStore, open_campaign_store

__all__ = ["Campaign", "CampaignStore", "CAMPAIGN_SCHEMA_VERSION", "REQUIRED", "Runner", "STAGES", "STATUS_COLUMNS",
           "open_campaign_store", "status_table"]
