"""The built-in domains (:data:`DOMAIN_DEFS`): six used for training (commerce, energy, education, sports, finance,
healthcare; :data:`TRAINING_DOMAINS`) and one held out from every training config (logistics;
:data:`HELDOUT_DOMAINS`), so evaluation can measure transfer to a domain the manager never saw."""

from __future__ import annotations

import numpy as np

from synthesis.domains.schema import FilterSpec
from synthesis.domains.synthetic import DomainDef


def _money(mean: float, sigma: float = 0.6):
    return lambda rng, n: np.round(rng.lognormal(np.log(mean), sigma, size=n), 2)


def _ints(low: int, high: int):
    return lambda rng, n: rng.integers(low, high + 1, size=n)


def _floats(low: float, high: float, decimals: int = 2):
    return lambda rng, n: np.round(rng.uniform(low, high, size=n), decimals)


def _poisson(lam: float):
    return lambda rng, n: rng.poisson(lam, size=n).astype(float)


COMMERCE = DomainDef(
    name="commerce",
    title="Retail orders across stores",
    intro="A year of orders from a chain of stores (`orders.csv`: order_id, order_date, store_id, region, quantity, "
    "unit_price, shipping_days) and the store list (`stores.csv`: store_id, format, opened).",
    fact="orders",
    fact_noun="orders",
    id_col="order_id",
    date_col="order_date",
    category="region",
    category_noun="region",
    categories={"North": 3, "South": 2, "East": 2, "West": 3},
    synonyms={"N": "North", "Northern": "North", "S": "South", "Eastern": "East", "W": "West"},
    columns={"quantity": _ints(1, 12), "unit_price": _money(30.0)},
    extra={"shipping_days": _ints(1, 9)},
    measure="revenue",
    measure_noun="revenue",
    derive="{f}['quantity'] * {f}['unit_price'] * (1 - discount_rate)",
    derive_text="Revenue is quantity * unit_price * (1 - discount_rate), with discount_rate = 0.05.",
    param=("discount_rate", 0.05, 0.08, "the promotion discount was raised for the whole year"),
    nan_column="unit_price",
    error_column="unit_price",
    error_factor=100.0,
    outlier_column="quantity",
    filters=(FilterSpec("quantity", "quantity", (5, 10)), FilterSpec("unit_price", "unit price", (50.0,), op=">=")),
    dim="stores",
    dim_noun="stores",
    dim_key="store_id",
    key_prefix="S",
    n_dim=12,
    dim_attr="format",
    dim_attr_noun="store format",
    attr_values=("Mall", "High Street", "Outlet"),
    exclude_reason="Store {key} was a training store; its orders are test data.",
)

ENERGY = DomainDef(
    name="energy",
    title="Electricity readings across sites",
    intro="Daily electricity readings of metered sites (`readings.csv`: reading_id, reading_date, site_id, zone, kwh, "
    "peak_kw, outdoor_temp) and the site list (`sites.csv`: site_id, site_type, opened).",
    fact="readings",
    fact_noun="readings",
    id_col="reading_id",
    date_col="reading_date",
    category="zone",
    category_noun="zone",
    categories={"Urban": 4, "Rural": 2, "Coastal": 2, "Industrial": 3},
    synonyms={"City": "Urban", "Countryside": "Rural", "Ind": "Industrial", "Coast": "Coastal"},
    columns={"kwh": _floats(50.0, 600.0, 1), "peak_kw": _floats(5.0, 90.0, 1)},
    extra={"outdoor_temp": _floats(-5.0, 32.0, 1)},
    measure="cost",
    measure_noun="energy cost",
    derive="{f}['kwh'] * tariff_per_kwh",
    derive_text="Energy cost is kwh * tariff_per_kwh, with tariff_per_kwh = 0.21.",
    param=("tariff_per_kwh", 0.21, 0.24, "the supplier's tariff was revised retroactively"),
    nan_column="kwh",
    error_column="kwh",
    error_factor=1000.0,
    outlier_column="peak_kw",
    filters=(FilterSpec("kwh", "kwh", (400.0, 500.0)), FilterSpec("peak_kw", "peak kW", (75.0,), op=">=")),
    dim="sites",
    dim_noun="sites",
    dim_key="site_id",
    key_prefix="E",
    n_dim=10,
    dim_attr="site_type",
    dim_attr_noun="site type",
    attr_values=("Office", "Factory", "Warehouse"),
    exclude_reason="The meter of site {key} was faulty all year; its readings are invalid.",
)

EDUCATION = DomainDef(
    name="education",
    title="Student results across schools",
    intro="Course results of students (`results.csv`: result_id, exam_date, school_id, subject, exam_score, "
    "coursework_score, attendance_rate, study_hours) and the school list (`schools.csv`: school_id, school_type, "
    "opened).",
    fact="results",
    fact_noun="results",
    id_col="result_id",
    date_col="exam_date",
    category="subject",
    category_noun="subject",
    categories={"Math": 3, "Science": 3, "English": 2, "History": 1},
    synonyms={"Maths": "Math", "Mathematics": "Math", "Eng": "English", "Sci": "Science"},
    columns={
        "exam_score": _floats(20.0, 100.0, 1),
        "coursework_score": _floats(30.0, 100.0, 1),
        "attendance_rate": _floats(0.6, 1.0, 3),
        "study_hours": _floats(0.0, 14.0, 1),
    },
    measure="final_score",
    measure_noun="final score",
    derive="exam_weight * {f}['exam_score'] + (1 - exam_weight) * {f}['coursework_score']",
    derive_text="The final score is exam_weight * exam_score + (1 - exam_weight) * coursework_score, "
    "with exam_weight = 0.6.",
    param=("exam_weight", 0.6, 0.7, "the exam board changed the weighting"),
    nan_column="exam_score",
    error_column="exam_score",
    error_factor=10.0,
    outlier_column="study_hours",
    filters=(
        FilterSpec("attendance_rate", "attendance rate", (0.9,), op=">="),
        FilterSpec("study_hours", "study hours", (8.0, 12.0)),
    ),
    dim="schools",
    dim_noun="schools",
    dim_key="school_id",
    key_prefix="SC",
    n_dim=8,
    dim_attr="school_type",
    dim_attr_noun="school type",
    attr_values=("Public", "Private", "Charter"),
    exclude_reason="School {key} withdrew its results after an exam irregularity.",
    money=False,
)

SPORTS = DomainDef(
    name="sports",
    title="Player appearances across a season",
    intro="Match appearances of players (`appearances.csv`: appearance_id, match_date, team_id, position, minutes, "
    "goals, assists) and the team list (`teams.csv`: team_id, league, opened).",
    fact="appearances",
    fact_noun="appearances",
    id_col="appearance_id",
    date_col="match_date",
    category="position",
    category_noun="position",
    categories={"Forward": 3, "Midfielder": 4, "Defender": 4, "Goalkeeper": 1},
    synonyms={"Fw": "Forward", "Striker": "Forward", "Mid": "Midfielder", "Def": "Defender", "Gk": "Goalkeeper"},
    columns={"minutes": _ints(5, 90), "goals": _poisson(0.4), "assists": _poisson(0.3)},
    measure="fantasy_points",
    measure_noun="fantasy points",
    derive="{f}['goals'] * points_per_goal + {f}['assists'] * 3 + {f}['minutes'] / 30",
    derive_text="Fantasy points are goals * points_per_goal + assists * 3 + minutes / 30, with points_per_goal = 4.",
    param=("points_per_goal", 4, 5, "the league changed its scoring rules for the season"),
    nan_column="goals",
    error_column="minutes",
    error_factor=10.0,
    outlier_column="minutes",
    filters=(FilterSpec("minutes", "minutes", (60, 80), op=">="), FilterSpec("goals", "goals", (0,))),
    dim="teams",
    dim_noun="teams",
    dim_key="team_id",
    key_prefix="T",
    n_dim=10,
    dim_attr="league",
    dim_attr_noun="league",
    attr_values=("Premier", "Championship", "League One"),
    exclude_reason="Team {key}'s matches were friendlies and do not count.",
    money=False,
)

FINANCE = DomainDef(
    name="finance",
    title="Card and account transactions",
    intro="A year of transactions booked in EUR (`transactions.csv`: transaction_id, booking_date, account_id, "
    "channel, amount_eur, fee_eur) and the account list (`accounts.csv`: account_id, segment, opened). Reports are "
    "in USD.",
    fact="transactions",
    fact_noun="transactions",
    id_col="transaction_id",
    date_col="booking_date",
    category="channel",
    category_noun="channel",
    categories={"Online": 4, "Branch": 2, "Mobile": 4, "Phone": 1},
    synonyms={"Web": "Online", "Internet": "Online", "App": "Mobile", "Telephone": "Phone"},
    columns={"amount_eur": _money(250.0, 0.9), "fee_eur": _floats(0.0, 8.0, 2)},
    measure="amount_usd",
    measure_noun="amount in USD",
    derive="{f}['amount_eur'] * eur_usd_rate",
    derive_text="Amounts in USD are amount_eur * eur_usd_rate, with eur_usd_rate = 1.08.",
    param=("eur_usd_rate", 1.08, 1.1, "treasury fixed a new conversion rate for the reporting year"),
    nan_column="amount_eur",
    error_column="amount_eur",
    error_factor=1000.0,
    outlier_column="amount_eur",
    filters=(FilterSpec("amount_eur", "amount in EUR", (500.0, 1000.0)), FilterSpec("fee_eur", "fee", (5.0,))),
    dim="accounts",
    dim_noun="accounts",
    dim_key="account_id",
    key_prefix="A",
    n_dim=25,
    dim_attr="segment",
    dim_attr_noun="customer segment",
    attr_values=("Retail", "Corporate", "Private"),
    exclude_reason="Account {key} is an internal test account.",
)

HEALTHCARE = DomainDef(
    name="healthcare",
    title="Hospital admissions across wards",
    intro="A year of hospital admissions (`admissions.csv`: admission_id, admit_date, ward_id, admission_type, "
    "length_of_stay, age, readmitted) and the ward list (`wards.csv`: ward_id, specialty, opened).",
    fact="admissions",
    fact_noun="admissions",
    id_col="admission_id",
    date_col="admit_date",
    category="admission_type",
    category_noun="admission type",
    categories={"Emergency": 5, "Elective": 3, "Transfer": 1},
    synonyms={"Er": "Emergency", "Urgent": "Emergency", "Planned": "Elective", "Xfer": "Transfer"},
    columns={"length_of_stay": _poisson(4.5), "age": _ints(1, 95)},
    extra={"readmitted": _ints(0, 1)},
    measure="cost",
    measure_noun="treatment cost",
    derive="{f}['length_of_stay'] * cost_per_bed_day",
    derive_text="Treatment cost is length_of_stay * cost_per_bed_day, with cost_per_bed_day = 650.",
    param=("cost_per_bed_day", 650, 700, "finance published the audited bed-day cost"),
    nan_column="length_of_stay",
    error_column="length_of_stay",
    error_factor=100.0,
    outlier_column="length_of_stay",
    filters=(FilterSpec("length_of_stay", "length of stay", (6, 8)), FilterSpec("age", "age", (65,), op=">=")),
    dim="wards",
    dim_noun="wards",
    dim_key="ward_id",
    key_prefix="W",
    n_dim=9,
    dim_attr="specialty",
    dim_attr_noun="ward specialty",
    attr_values=("Cardiology", "Oncology", "Orthopedics", "General"),
    exclude_reason="Ward {key}'s records were duplicated from another system.",
)

LOGISTICS = DomainDef(
    name="logistics",
    title="Parcel shipments across depots",
    intro="A year of parcel shipments (`shipments.csv`: shipment_id, ship_date, depot_id, service, weight_kg, "
    "distance_km, delivery_days) and the depot list (`depots.csv`: depot_id, depot_type, opened).",
    fact="shipments",
    fact_noun="shipments",
    id_col="shipment_id",
    date_col="ship_date",
    category="service",
    category_noun="service level",
    categories={"Standard": 5, "Express": 3, "Freight": 2, "Economy": 2},
    synonyms={"Std": "Standard", "Regular": "Standard", "Exp": "Express", "Next-Day": "Express", "Eco": "Economy"},
    columns={"weight_kg": _floats(0.2, 40.0, 2), "distance_km": _floats(5.0, 900.0, 1)},
    extra={"delivery_days": _ints(1, 8)},
    measure="charge",
    measure_noun="shipping charge",
    derive="{f}['weight_kg'] * rate_per_kg + {f}['distance_km'] * 0.01",
    derive_text="The shipping charge is weight_kg * rate_per_kg + distance_km * 0.01, with rate_per_kg = 1.9.",
    param=("rate_per_kg", 1.9, 2.15, "the carrier's fuel surcharge raised the rate for the whole year"),
    nan_column="weight_kg",
    error_column="weight_kg",
    error_factor=1000.0,
    outlier_column="distance_km",
    filters=(
        FilterSpec("weight_kg", "weight in kg", (10.0, 25.0)),
        FilterSpec("distance_km", "distance in km", (500.0,), op=">="),
    ),
    dim="depots",
    dim_noun="depots",
    dim_key="depot_id",
    key_prefix="D",
    n_dim=11,
    dim_attr="depot_type",
    dim_attr_noun="depot type",
    attr_values=("Hub", "Local", "Cross-dock"),
    exclude_reason="Depot {key} was a pilot site; its shipments were simulated.",
)

TRAINING_DOMAINS = ("commerce", "education", "energy", "finance", "healthcare", "sports")
"""The domains of the training configs (``configs/synthesis/*.yaml``)."""
HELDOUT_DOMAINS = ("logistics",)
"""Domains no training config uses: the held-out-domain evaluation suite draws from them."""

DOMAIN_DEFS: dict[str, DomainDef] = {
    d.name: d for d in (COMMERCE, ENERGY, EDUCATION, SPORTS, FINANCE, HEALTHCARE, LOGISTICS)
}
"""Domain name -> its definition."""
